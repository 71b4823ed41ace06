"""``schedctl dags render`` and ``schedctl dags test`` through the CLI, with no services running.

``dags test`` runs the tasks for real (a worker's executor: shell subprocesses and a warm Python
child), with the scheduler's planner deciding what runs next.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from typer.testing import CliRunner, Result

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import app
from schedd.v1 import resources_pb2 as pb
from schedd_exec.bundle_pack import import_root, pack
from schedd_sdk.loader import load_dags

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SDK_EXAMPLES = REPO / "tests" / "unit" / "sdk_examples"


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # where workers run, so Python tasks import by their module paths


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def test_render_prints_the_spec_dags_register_reads_back() -> None:
    rendered = cli("dags", "render", str(EXAMPLES / "setup_teardown.py"))
    assert rendered.exit_code == 0, rendered.output
    spec = json_format.ParseDict(yaml.safe_load(rendered.stdout), pb.DagSpec())
    (expected,) = load_dags(EXAMPLES / "setup_teardown.py", import_root(EXAMPLES))
    expected.code_bundle = pack(EXAMPLES).sha256  # the bundle register uploads with it
    assert spec == expected
    assert "teardown: true" in rendered.stdout and "TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS" in rendered.stdout
    as_json = cli("dags", "render", str(EXAMPLES / "taskflow_groups.py"), "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    (groups,) = load_dags(EXAMPLES / "taskflow_groups.py", import_root(EXAMPLES))
    groups.code_bundle = expected.code_bundle
    assert json_format.Parse(as_json.stdout, pb.DagSpec()) == groups


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (SDK_EXAMPLES / "broken.py", "importing it raised KeyError: 'limit'"),
        (SDK_EXAMPLES / "bad_task_call.py", "load(): argument 1 is <@task"),
        (SDK_EXAMPLES / "missing.py", "No such file or directory"),
    ],
)
def test_render_fails_with_the_reason_for_a_file_that_does_not_import_or_compile(
    path: Path, message: str
) -> None:
    rendered = cli("dags", "render", str(path))
    assert rendered.exit_code == 2
    assert message in " ".join(rendered.output.split()), rendered.output


def test_dags_test_runs_a_teardown_after_failed_work_and_exits_1() -> None:
    run = cli("dags", "test", str(EXAMPLES / "setup_teardown.py"), "--conf", '{"fail": true}')
    assert run.exit_code == 1, run.output
    lines = run.stdout.splitlines()
    assert "[create_cluster] success" in lines
    assert any(line.startswith("[run_job] failed: RuntimeError: the job fails on purpose") for line in lines)
    assert "[delete_cluster] success" in lines
    assert lines[-1].endswith(": failed")
    assert any(line.startswith("[delete_cluster] | deleted ") for line in lines)  # its log, as it goes


def test_dags_test_passes_values_and_exits_0_for_a_successful_run() -> None:
    run = cli("dags", "test", str(EXAMPLES / "taskflow_groups.py"), "--logical-date", "2025-01-02")
    assert run.exit_code == 0, run.output
    assert "dag taskflow_groups: testing a run at 2025-01-02T00:00:00+00:00" in run.stdout
    assert "[report] | eu=60, us=30 (from the example)" in run.stdout
    assert run.stdout.splitlines()[-1] == "run test__2025-01-02T00:00:00+00:00: success"


def test_dags_test_finds_a_dag_by_id_and_follows_branches() -> None:
    run = cli("dags", "test", "branching", "--dags-folder", str(EXAMPLES), "--conf", '{"full": true}')
    assert run.exit_code == 0, run.output
    assert "[full_refresh] success" in run.stdout and "[incremental] skipped" in run.stdout
    assert "[publish] success" in run.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["branching", "--dags-folder", str(EXAMPLES / "nope")], "no DAG folder"),
        (["no_such_dag", "--dags-folder", str(EXAMPLES)], "no DAG 'no_such_dag'"),
        ([str(SDK_EXAMPLES / "multi.py")], "pick one with --dag"),
        ([str(EXAMPLES / "branching.py"), "--conf", "[1]"], "--conf must be a JSON object"),
        ([str(EXAMPLES / "branching.py"), "--conf", "{"], "--conf is not valid JSON"),
        ([str(EXAMPLES / "branching.py"), "--logical-date", "soon"], "is not an ISO 8601 date"),
        ([str(SDK_EXAMPLES / "broken.py")], "importing it raised KeyError"),
    ],
)
def test_dags_test_refuses_bad_input_with_exit_2(args: list[str], message: str) -> None:
    run = cli("dags", "test", *args)
    assert run.exit_code == 2
    assert message in " ".join(run.output.split()), run.output


def test_a_key_missing_from_an_upstream_result_fails_the_task_with_both_named() -> None:
    run = cli("dags", "test", str(SDK_EXAMPLES / "missing_key.py"))
    assert run.exit_code == 1, run.output
    assert "[split] success" in run.stdout
    assert (
        "[total] failed: argument 1: split['nope']: 'split' returned no key 'nope' (its keys: 'even', 'odd')"
        in (run.stdout)
    )
