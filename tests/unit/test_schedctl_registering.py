"""What ``dags render`` prints and ``dags register`` sends, against an in-process fake api
(``tests.unit.fake_schedctl_api``): the same specs from any current directory, every bad file of
a directory listed (nothing registered, or the rest with ``--keep-going``), ``--diff`` without
default-valued fields or task order noise, integral numbers shown as integers unless declared
``number``, and the closing lines of ``make run`` that work as printed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from google.protobuf import json_format

from schedctl.cli import EXIT_REJECTED
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_devstack import run_local
from tests.unit.fake_schedctl_api import FakeApi, invoke, serve

Api = tuple[str, FakeApi]

FLOW = """
from datetime import datetime
from schedd_sdk import dag, task


@task
def count(params: dict) -> int:
    return int(params.get("rows", 1))


@dag(start_date=datetime(2024, 1, 1))
def where_from() -> None:
    count()
"""


@pytest.fixture
def api() -> Iterator[Api]:
    yield from serve()


def _render(api: Api, path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> pb.DagSpec:
    monkeypatch.chdir(cwd)
    done = invoke(api, "dags", "render", str(path))
    assert done.exit_code == 0, done.output
    return json_format.ParseDict(yaml.safe_load(done.stdout), pb.DagSpec())


def test_render_is_what_register_sends_from_any_directory(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "flows").mkdir(parents=True)
    flow = project / "flows" / "where_from.py"
    flow.write_text(FLOW)
    from_project = _render(api, flow, project, monkeypatch)
    from_its_directory = _render(api, flow, project / "flows", monkeypatch)
    from_elsewhere = _render(api, flow, tmp_path, monkeypatch)
    assert from_project == from_its_directory == from_elsewhere
    assert from_project.tasks[0].python.target == "where_from:count"
    monkeypatch.chdir(project)
    registered = invoke(api, "dags", "register", str(flow), "--dry-run")
    assert registered.exit_code == 0, registered.output
    sent = [r.spec for r in api[1].requests if isinstance(r, api_pb2.RegisterDagRequest)]
    assert sent and all(spec == from_project for spec in sent)
    assert from_project.code_bundle


def _directory(tmp_path: Path) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    task = {"task_id": "t", "shell": {"command": "true"}}
    (folder / "a_good.json").write_text(json.dumps({"dag_id": "good", "tasks": [task]}))
    (folder / "b_bad.yaml").write_text("dag_id: [unclosed\n")
    (folder / "c_broken.py").write_text("raise RuntimeError('no such table')\n")
    (folder / "d_refused.json").write_text(json.dumps({"dag_id": "refused", "tasks": [task]}))
    (folder / "e_twice.json").write_text(json.dumps({"dag_id": "good", "tasks": [task]}))
    return folder


def _stored(api: Api) -> list[str]:
    requests = [r for r in api[1].requests if isinstance(r, api_pb2.RegisterDagRequest)]
    return [r.spec.dag_id for r in requests if not r.validate_only]


def test_a_directory_with_bad_files_lists_every_error_and_registers_nothing(api: Api, tmp_path: Path) -> None:
    done = invoke(api, "dags", "register", str(_directory(tmp_path)))
    assert done.exit_code == EXIT_REJECTED, done.output
    text = " ".join(done.stderr.split())
    for expected in (
        "b_bad.yaml",
        "c_broken.py",
        "no such table",
        "dag refused: INVALID_ARGUMENT",
        "e_twice.json",
    ):
        assert expected in text, expected
    assert "nothing registered" in text
    assert _stored(api) == []


def test_keep_going_registers_the_valid_dags_and_still_fails(api: Api, tmp_path: Path) -> None:
    done = invoke(api, "dags", "register", str(_directory(tmp_path)), "--keep-going")
    assert done.exit_code == EXIT_REJECTED, done.output
    assert _stored(api) == ["good"]
    assert "c_broken.py" in done.stderr and "dag refused" in done.stderr


def _spec_file(tmp_path: Path, task_ids: list[str]) -> Path:
    tasks = [{"task_id": t, "shell": {"command": f"echo {t}"}} for t in task_ids]
    path = tmp_path / "diffed.json"
    path.write_text(json.dumps({"dag_id": "diffed", "tasks": tasks}))
    return path


def test_diff_leaves_out_defaults_and_ignores_task_order(api: Api, tmp_path: Path) -> None:
    api[1].missing.add("diffed")
    new = invoke(api, "dags", "register", str(_spec_file(tmp_path, ["b", "a"])), "--diff", "--dry-run")
    assert new.exit_code == 0, new.output
    assert "+dag_id: diffed" in new.stdout
    assert "retries" not in new.stdout and "catchup" not in new.stdout, "defaults are left out"
    api[1].missing.clear()
    registered = json_format.ParseDict(
        {"dag_id": "diffed", "tasks": [{"task_id": t, "shell": {"command": f"echo {t}"}} for t in "ab"]},
        pb.DagSpec(),
    )
    api[1].dags["diffed"] = pb.Dag(dag_id="diffed", latest_version="v1", spec=registered)
    same = invoke(api, "dags", "register", str(_spec_file(tmp_path, ["b", "a"])), "--diff", "--dry-run")
    assert same.exit_code == 0, same.output
    assert "dag diffed: no changes" in same.stdout


def test_integral_numbers_are_shown_as_integers_unless_declared_number(api: Api, tmp_path: Path) -> None:
    spec = {
        "dag_id": "numbers",
        "params": {"rows": 10, "limit": 10, "ratio": 10.0, "scale": 2.5},
        "param_schemas": {"limit": {"type": "integer"}, "ratio": {"type": "number"}},
        "tasks": [{"task_id": "t", "params": {"rows": 3, "ratio": 1}, "shell": {"command": "true"}}],
    }
    path = tmp_path / "numbers.json"
    path.write_text(json.dumps(spec))
    rendered = invoke(api, "dags", "render", str(path))
    assert rendered.exit_code == 0, rendered.output
    params = yaml.safe_load(rendered.stdout)["params"]
    assert params == {"rows": 10, "limit": 10, "ratio": 10.0, "scale": 2.5}
    assert [type(params[k]) for k in ("rows", "limit", "ratio")] == [int, int, float]
    assert "rows: 10\n" in rendered.stdout and "ratio: 10.0\n" in rendered.stdout
    task_params = yaml.safe_load(rendered.stdout)["tasks"][0]["params"]
    assert type(task_params["rows"]) is int and type(task_params["ratio"]) is float
    api[1].dags["numbers"] = pb.Dag(dag_id="numbers", spec=json_format.ParseDict(spec, pb.DagSpec()))
    as_json = json.loads(invoke(api, "-o", "json", "dags", "get", "numbers").stdout)
    assert json.dumps(as_json["spec"]["params"], sort_keys=True) == (
        '{"limit": 10, "ratio": 10.0, "rows": 10, "scale": 2.5}'
    )


def test_make_runs_closing_lines_activate_the_virtual_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = SimpleNamespace(
        env=lambda: {"SCHEDD_API": "127.0.0.1:1", "SCHEDD_DATABASE_URL": "db", "SCHEDD_ETCD_ENDPOINTS": "e"},
        metrics={},
        web_url="http://127.0.0.1:2",
    )
    stack = SimpleNamespace(base_dir=Path("/tmp/stack"), etcd=SimpleNamespace(credentials=None))
    with run_local.console.capture() as captured:
        run_local._print_usage(cluster, stack, Path("/tmp/logs"))  # type: ignore[arg-type]
    lines = [line.strip() for line in captured.get().splitlines()]
    activate = f". {Path(sys.prefix) / 'bin' / 'activate'}"
    assert activate in lines
    assert lines.index(activate) < lines.index("schedctl dags list")
    assert (Path(sys.prefix) / "bin" / "activate").is_file()
