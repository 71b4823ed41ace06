"""schedctl's output and connection settings through a real api: every format parses (JSON and
YAML with lower-case state names and zero values kept; names; wide tables), nothing is cut when
piped, empty lists say so, named contexts with flag and environment overrides, ``version``, a
wait that times out exits 6, and paging through 1,000 runs returns each exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from schedd.v1 import api_pb2, api_pb2_grpc
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

RUN_ID = "r-" + "x" * 100  # longer than any terminal column


def ctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """schedctl with no address unless given, no COLUMNS, and only the environment given."""
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("SCHEDD_", "SCHEDCTL_")) and k != "COLUMNS"
    }
    return subprocess.run(
        [sys.executable, "-m", "schedctl.main", *args],
        capture_output=True,
        text=True,
        env=base | {"NO_COLOR": "1"} | (env or {}),
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def made(module_cluster: RunningCluster, tmp_path_factory: pytest.TempPathFactory) -> RunningCluster:
    spec = tmp_path_factory.mktemp("out") / "out.json"
    spec.write_text(
        json.dumps({"dag_id": "out_dag", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]})
    )
    assert module_cluster.schedctl("dags", "register", str(spec)).returncode == 0
    done = module_cluster.schedctl("runs", "trigger", "out_dag", "--run-id", RUN_ID, "--wait")
    assert done.returncode == 0, done.stderr
    return module_cluster


def api(cluster: RunningCluster) -> tuple[str, str]:
    return ("--api", cluster.api_address)


@pytest.mark.parametrize(
    "command",
    [
        ("dags", "list"),
        ("runs", "list", "out_dag"),
        ("runs", "get", f"out_dag/{RUN_ID}"),
        ("pools", "list"),
        ("workers", "list"),
        ("leader",),
        ("version",),
    ],
)
def test_json_and_yaml_parse_alike(made: RunningCluster, command: tuple[str, ...]) -> None:
    as_json = ctl(*api(made), "-o", "json", *command)
    as_yaml = ctl(*api(made), "-o", "yaml", *command)
    assert as_json.returncode == 0 and as_yaml.returncode == 0, as_json.stderr + as_yaml.stderr
    assert stable(json.loads(as_json.stdout)) == stable(yaml.safe_load(as_yaml.stdout))


def stable(data: Any) -> Any:
    """Without the times that move between two calls (a worker's last heartbeat)."""
    if isinstance(data, list):
        return [stable(item) for item in data]
    if isinstance(data, dict):
        return {k: stable(v) for k, v in data.items() if k not in ("last_seen_time", "running")}
    return data


def test_states_are_lower_case_and_zero_values_kept(made: RunningCluster) -> None:
    run: dict[str, Any] = json.loads(ctl(*api(made), "-o", "json", "runs", "get", f"out_dag/{RUN_ID}").stdout)
    assert run["state"] == "success" and run["run_type"] == "manual"
    (task,) = run["task_instances"]
    assert task["state"] == "success"
    assert task["exit_code"] == 0 and task["error"] == ""  # zero values are printed, not dropped


def test_names_and_wide_tables(made: RunningCluster) -> None:
    names = ctl(*api(made), "-o", "name", "runs", "list", "out_dag").stdout.split()
    assert names == [f"dags/out_dag/runs/{RUN_ID}"]
    assert ctl(*api(made), "-o", "name", "dags", "list").stdout.split().count("dags/out_dag") == 1
    wide = ctl(*api(made), "-o", "wide", "runs", "get", f"out_dag/{RUN_ID}").stdout
    assert "POOL" in wide and "QUEUE" in wide and "ERROR" in wide


def test_nothing_is_cut_when_piped_and_empty_lists_say_so(made: RunningCluster) -> None:
    listed = ctl(*api(made), "runs", "list", "out_dag")
    assert f"dags/out_dag/runs/{RUN_ID}" in listed.stdout, listed.stdout
    assert "\x1b[" not in listed.stdout  # no colour codes in a pipe
    empty = ctl(*api(made), "backfill", "list", "out_dag")
    assert empty.returncode == 0 and empty.stdout.strip() == "no backfills"


def test_contexts_with_flag_and_environment_overrides(made: RunningCluster, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    token = tmp_path / "token"
    token.write_text("unused-in-development-mode\n")
    config.write_text(
        yaml.safe_dump(
            {
                "current-context": "here",
                "contexts": {
                    "here": {"api": made.api_address, "token-file": str(token)},
                    "nowhere": {"api": "127.0.0.1:1"},
                },
            }
        )
    )
    env = {"SCHEDCTL_CONFIG": str(config)}
    assert ctl("dags", "list", env=env).returncode == 0
    assert ctl("--timeout", "2", "dags", "list", env=env | {"SCHEDCTL_CONTEXT": "nowhere"}).returncode == 5
    assert ctl("--timeout", "2", "--context", "nowhere", "dags", "list", env=env).returncode == 5
    assert ctl("--timeout", "2", "--api", "127.0.0.1:1", "dags", "list", env=env).returncode == 5
    assert (
        ctl("--context", "nowhere", "dags", "list", env=env | {"SCHEDD_API": made.api_address}).returncode
        == 0
    )
    missing = ctl("--context", "gone", "dags", "list", env=env)
    assert missing.returncode == 2 and "no context 'gone'" in missing.stderr
    assert ctl("config", "use-context", "nowhere", env=env).returncode == 0
    assert ctl("config", "current-context", env=env).stdout.strip() == "nowhere"
    assert ctl("config", "set-context", "here", "--api", made.api_address, env=env).returncode == 0
    assert ctl("config", "use-context", "here", env=env).returncode == 0
    assert ctl("dags", "list", env=env).returncode == 0
    config.write_text("contexts: [1, 2]\n")
    broken = ctl("dags", "list", env=env)
    assert broken.returncode == 2 and str(config) in broken.stderr and "Traceback" not in broken.stderr
    config.write_text("contexts:\n  x:\n    colour: blue\n")
    unknown = ctl("dags", "list", env=env)
    assert unknown.returncode == 2 and "contexts.x.colour" in unknown.stderr


def test_version_names_the_client_the_api_and_the_schema(made: RunningCluster) -> None:
    shown = ctl(*api(made), "version")
    assert shown.returncode == 0 and "schedctl" in shown.stdout and "schema" in shown.stdout
    data = json.loads(ctl(*api(made), "-o", "json", "version").stdout)
    assert data["server"]["api"] == "schedd.v1" and data["server"]["schema_revision"] and data["client"]


def test_a_wait_that_times_out_exits_6(made: RunningCluster) -> None:
    assert made.schedctl("dags", "pause", "out_dag").returncode == 0
    try:
        waited = ctl(*api(made), "runs", "trigger", "out_dag", "--wait", "--wait-timeout", "1")
        assert waited.returncode == 6 and "did not finish within 1s" in waited.stderr
        assert "paused" in waited.stderr
    finally:
        assert made.schedctl("dags", "unpause", "out_dag").returncode == 0
        assert made.schedctl("runs", "list", "out_dag").returncode == 0


def test_paging_through_1000_runs_returns_each_exactly_once(made: RunningCluster, tmp_path: Path) -> None:
    spec = tmp_path / "many.json"
    spec.write_text(
        json.dumps({"dag_id": "out_many", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]})
    )
    assert made.schedctl("dags", "register", str(spec)).returncode == 0
    assert made.schedctl("dags", "pause", "out_many").returncode == 0  # nothing runs: only rows
    with grpc.insecure_channel(made.api_address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        for i in range(1000):
            runs.CreateRun(
                api_pb2.CreateRunRequest(
                    parent="dags/out_many", run_id=f"m{i:04d}", request_id=str(uuid.uuid4())
                ),
                timeout=30,
            )
        seen: list[str] = []
        token = ""
        while True:
            page = runs.ListRuns(
                api_pb2.ListRunsRequest(parent="dags/out_many", page_size=97, page_token=token), timeout=30
            )
            seen += [r.run_id for r in page.runs]
            token = page.next_page_token
            if not token:
                break
    assert sorted(seen) == [f"m{i:04d}" for i in range(1000)]
    names = ctl(*api(made), "-o", "name", "runs", "list", "out_many", "--limit", "5000").stdout.split()
    assert len(names) == len(set(names)) == 1000


def test_runs_list_filters_by_state_type_and_date(made: RunningCluster, tmp_path: Path) -> None:
    spec = tmp_path / "filtered.json"
    spec.write_text(
        json.dumps(
            {
                "dag_id": "out_filtered",
                "tasks": [{"task_id": "t", "shell": {"command": 'test "$SCHEDD_RUN_ID" != bad'}}],
            }
        )
    )
    assert made.schedctl("dags", "register", str(spec)).returncode == 0
    assert made.schedctl("runs", "trigger", "out_filtered", "--run-id", "good", "--wait").returncode == 0
    assert made.schedctl("runs", "trigger", "out_filtered", "--run-id", "bad", "--wait").returncode == 1

    def names(*filters: str) -> list[str]:
        listed = ctl(*api(made), "-o", "name", "runs", "list", "out_filtered", *filters)
        assert listed.returncode == 0, listed.stderr
        return listed.stdout.split()

    assert names("--state", "failed") == ["dags/out_filtered/runs/bad"]
    assert names("--state", "success", "--state", "failed") == [
        "dags/out_filtered/runs/bad",
        "dags/out_filtered/runs/good",
    ]
    assert names("--type", "scheduled") == []
    assert len(names("--type", "manual")) == 2
    assert names("--since", "2999-01-01") == [] and len(names("--until", "2999-01-01")) == 2
    wrong = ctl(*api(made), "runs", "list", "--state", "finished")
    assert wrong.returncode == 2 and "queued, running, success, failed" in wrong.stderr
