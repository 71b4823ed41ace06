"""Bad input is rejected with a precise message and changes nothing.

Every case goes through the real ``schedctl`` (exit code 2, a message naming the
problem and the field) and, where the check is the server's, through the gRPC api
directly (the status code). After each rejected registration the DAG list and the
stored versions are exactly as before.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import json_format

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_devstack.ports import free_port
from tests.fixtures.services import RunningCluster, schedctl

pytestmark = pytest.mark.e2e

BASE_DAG = "e2e_base"
EXIT_REJECTED = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 5
RPC_TIMEOUT = 30.0


def _task(task_id: str, *upstream: str) -> dict[str, Any]:
    return {"task_id": task_id, "upstream": list(upstream), "shell": {"command": f"echo {task_id}"}}


BASE_SPEC: dict[str, Any] = {"dag_id": BASE_DAG, "tasks": [_task("a"), _task("b", "a")]}


@dataclass(frozen=True)
class BadSpec:
    spec: dict[str, Any]
    field: str
    #: regular expression the problem part of the message must match
    problem: str


# Most reuse the id of a registered DAG, so a half-applied registration would show as a new version.
BAD_SPECS = {
    "cycle": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [_task("x"), _task("a", "c"), _task("b", "a"), _task("c", "b", "x")]},
        "spec.tasks",
        r"cycle: (?P<first>[abc]) -> [abc] -> [abc] -> (?P=first)",
    ),
    "unknown upstream": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [_task("a"), _task("b", "a", "ghost")]},
        "spec.tasks[1].upstream[1]",
        r"unknown task id 'ghost'",
    ),
    "duplicate task id": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [_task("a"), _task("b", "a"), _task("a")]},
        "spec.tasks[2].task_id",
        r"duplicate task id 'a' \(also tasks\[0\]\)",
    ),
    "empty dag": BadSpec({"dag_id": BASE_DAG, "tasks": []}, "spec.tasks", r"at least one task"),
    "dag id with slash": BadSpec(
        {"dag_id": "team/etl", "tasks": [_task("a")]}, "spec.dag_id", r"'team/etl' is not a valid id"
    ),
    "self dependency": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [_task("a"), _task("b", "b")]},
        "spec.tasks[1].upstream[0]",
        r"cannot depend on itself",
    ),
    "empty command": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [{"task_id": "a", "shell": {"command": "  "}}]},
        "spec.tasks[0].shell.command",
        r"must not be empty",
    ),
    "retries that would overflow": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [{**_task("a"), "retries": 2147483647}]},
        "spec.tasks[0].retries",
        r"must be between 0 and 1000",
    ),
    "more slots than the pool has": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [{**_task("a"), "pool_slots": 129}]},
        "spec.tasks[0].pool_slots",
        r"pool 'default_pool' has 128: it could never run",
    ),
    "negative run timeout": BadSpec(
        {"dag_id": BASE_DAG, "dagrunTimeout": "-5s", "tasks": [_task("a")]},
        "spec.dagrun_timeout",
        r"must be positive",
    ),
    "a cron minute out of range": BadSpec(
        {**BASE_SPEC, "schedule": "61 * * * *", "start_date": "2025-01-01T00:00:00Z"},
        "spec.schedule",
        r"'61 \* \* \* \*' is not a valid cron expression",
    ),
    "a cron that never fires": BadSpec(
        {**BASE_SPEC, "schedule": "0 0 30 2 *", "start_date": "2025-01-01T00:00:00Z"},
        "spec.schedule",
        r"'0 0 30 2 \*' is not a valid cron expression: Bad day-of-month",
    ),
    "an unknown preset": BadSpec(
        {**BASE_SPEC, "schedule": "@fortnightly", "start_date": "2025-01-01T00:00:00Z"},
        "spec.schedule",
        r"unknown preset '@fortnightly'",
    ),
    "an unknown time zone": BadSpec(
        {
            **BASE_SPEC,
            "schedule": "@daily",
            "timezone": "Mars/Olympus_Mons",
            "start_date": "2025-01-01T00:00:00Z",
        },
        "spec.timezone",
        r"unknown time zone 'Mars/Olympus_Mons'",
    ),
    "an end date before the start date": BadSpec(
        {
            **BASE_SPEC,
            "schedule": "@daily",
            "start_date": "2025-01-02T00:00:00Z",
            "end_date": "2025-01-01T00:00:00Z",
        },
        "spec.end_date",
        r"is before the start date",
    ),
    "a schedule without a start date": BadSpec(
        {**BASE_SPEC, "schedule": "@daily"},
        "spec.start_date",
        r"a scheduled DAG needs a start date",
    ),
    "a NUL in a command": BadSpec(
        {"dag_id": BASE_DAG, "tasks": [{"task_id": "a", "shell": {"command": "echo \x00"}}]},
        "spec.tasks[0].shell.command",
        r"contains a NUL character",
    ),
}


def _check_message(text: str, bad: BadSpec) -> None:
    prefix = f"{bad.field}: "
    assert prefix in text, f"message does not name the field {bad.field!r}: {text!r}"
    problem = text.split(prefix, 1)[1]
    assert re.search(bad.problem, problem), f"message does not say {bad.problem!r}: {text!r}"


@dataclass
class Api:
    dags: Any
    runs: Any


@pytest.fixture(scope="module")
def env(module_cluster: RunningCluster, tmp_path_factory: pytest.TempPathFactory) -> RunningCluster:
    """The module's cluster with the base DAG registered and run once."""
    path = tmp_path_factory.mktemp("specs") / "base.yaml"
    path.write_text(yaml.safe_dump(BASE_SPEC))
    result = module_cluster.schedctl("dags", "register", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    result = module_cluster.schedctl("runs", "trigger", BASE_DAG, "--run-id", "taken")
    assert result.returncode == 0, result.stdout + result.stderr
    return module_cluster


@pytest.fixture(scope="module")
def api(env: RunningCluster) -> Iterator[Api]:
    with grpc.insecure_channel(env.api_address) as channel:
        yield Api(api_pb2_grpc.DagServiceStub(channel), api_pb2_grpc.RunServiceStub(channel))


def _state(env: RunningCluster) -> dict[str, Any]:
    """What a rejected request must not change: the DAG list as schedctl shows it and the stored rows."""
    listed = env.schedctl("-o", "json", "dags", "list")
    assert listed.returncode == 0, listed.stderr
    return {
        "list": listed.stdout,
        "versions": env.fetch("SELECT id, dag_id, version_hash FROM dag_versions ORDER BY id"),
        "dags": env.fetch("SELECT dag_id, latest_version_id, updated_at FROM dags ORDER BY dag_id"),
        "runs": env.fetch("SELECT id, dag_id, run_id FROM dag_runs ORDER BY id"),
    }


def _state_fast(env: RunningCluster, api: Api) -> dict[str, Any]:
    """Like ``_state`` with the list read over gRPC (no schedctl process)."""
    resp = api.dags.ListDags(api_pb2.ListDagsRequest(page_size=1000), timeout=RPC_TIMEOUT)
    return {
        "list": [json_format.MessageToDict(d) for d in resp.dags],
        "versions": env.fetch("SELECT id, dag_id, version_hash FROM dag_versions ORDER BY id"),
        "dags": env.fetch("SELECT dag_id, latest_version_id, updated_at FROM dags ORDER BY dag_id"),
        "runs": env.fetch("SELECT id, dag_id, run_id FROM dag_runs ORDER BY id"),
    }


def _rejected(result: Any, *needles: str) -> str:
    """Assert schedctl exited 2 (3 for NOT_FOUND) with an error mentioning every needle; the error text."""
    expected = EXIT_NOT_FOUND if "NOT_FOUND" in needles else EXIT_REJECTED
    assert result.returncode == expected, (
        f"exit {result.returncode}, expected {expected}:\n{result.stdout}{result.stderr}"
    )
    err: str = result.stderr
    assert err.startswith("error: "), err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"
    return err


def _rpc_error(call: Any, request: Any) -> Any:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=RPC_TIMEOUT)
    return info.value


# -- registration ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(BAD_SPECS), ids=list(BAD_SPECS))
def test_bad_spec_rejected_by_schedctl(env: RunningCluster, tmp_path: Path, case: str) -> None:
    bad = BAD_SPECS[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad.spec, sort_keys=False))
    before = _state(env)
    err = _rejected(env.schedctl("dags", "register", str(path)), "INVALID_ARGUMENT")
    _check_message(err.strip().removeprefix("error: INVALID_ARGUMENT: "), bad)
    assert _state(env) == before


@pytest.mark.parametrize("case", list(BAD_SPECS), ids=list(BAD_SPECS))
def test_bad_spec_rejected_by_api(env: RunningCluster, api: Api, case: str) -> None:
    bad = BAD_SPECS[case]
    spec = json_format.ParseDict(bad.spec, pb.DagSpec())
    before = _state_fast(env, api)
    error = _rpc_error(
        api.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec, request_id=str(uuid.uuid4()))
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    _check_message(error.details(), bad)
    assert _state_fast(env, api) == before


def test_cycle_message_shows_the_cycle_path(env: RunningCluster, api: Api) -> None:
    bad = BAD_SPECS["cycle"]
    spec = json_format.ParseDict(bad.spec, pb.DagSpec())
    error = _rpc_error(api.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec))
    path = error.details().split("cycle: ", 1)[1].split(" -> ")
    assert path[0] == path[-1] and sorted(path[:-1]) == ["a", "b", "c"], error.details()
    upstream = {t["task_id"]: set(t["upstream"]) for t in bad.spec["tasks"]}
    for here, there in itertools.pairwise(path):
        # consecutive ids are joined by an edge, one way or the other
        assert there in upstream[here] or here in upstream[there], f"{here} -> {there} is no edge: {path}"


def test_malformed_yaml(env: RunningCluster, tmp_path: Path) -> None:
    before = _state(env)
    broken = tmp_path / "broken.yaml"
    broken.write_text("dag_id: broken\ntasks:\n  - task_id: a\n    shell: {command: 'echo a'\n")
    err = _rejected(env.schedctl("dags", "register", str(broken)), str(broken), "not valid YAML")

    not_a_mapping = tmp_path / "list.yaml"
    not_a_mapping.write_text("- dag_id: x\n")
    _rejected(env.schedctl("dags", "register", str(not_a_mapping)), "expected a mapping")

    unknown_field = tmp_path / "unknown_field.yaml"
    unknown_field.write_text("dag_id: typo\ntasks:\n  - task_id: a\n    shel: {command: 'echo a'}\n")
    err = _rejected(env.schedctl("dags", "register", str(unknown_field)), '"shel"', "tasks[0]")
    assert "Traceback" not in err
    assert _state(env) == before


def test_missing_file(env: RunningCluster, tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist.yaml"
    _rejected(env.schedctl("dags", "register", str(missing)), str(missing), "No such file")


def test_oversized_request_is_resource_exhausted(env: RunningCluster, api: Api, tmp_path: Path) -> None:
    huge = copy.deepcopy(BASE_SPEC)
    huge["description"] = "x" * (17 * 1024 * 1024)  # over the servers' 4 MiB per message
    before = _state_fast(env, api)
    spec = json_format.ParseDict(huge, pb.DagSpec())
    error = _rpc_error(api.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error

    path = tmp_path / "huge.json"  # JSON is YAML too, and much faster to write
    path.write_text(json.dumps(huge))
    _rejected(env.schedctl("dags", "register", str(path)), "a DAG file may have at most")

    # Under the transport limit but over the spec limit (3 MiB): the validator names the field.
    big = copy.deepcopy(BASE_SPEC)
    big["description"] = "x" * (3 * 1024 * 1024 + 512 * 1024)  # under the servers' 4 MiB per message
    spec = json_format.ParseDict(big, pb.DagSpec())
    error = _rpc_error(api.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert error.details().startswith("spec: is ") and "the limit is 3145728" in error.details()
    assert _state_fast(env, api) == before

    # the api is still serving
    resp = api.dags.ListDags(api_pb2.ListDagsRequest(), timeout=RPC_TIMEOUT)
    assert BASE_DAG in [d.dag_id for d in resp.dags]


def test_yaml_error_quoting_brackets_is_reported(env: RunningCluster, tmp_path: Path) -> None:
    path = tmp_path / "brackets.yaml"
    path.write_text("dag_id: x\ntasks: [/tmp/x]]\n")  # the YAML error quotes this line
    err = _rejected(env.schedctl("dags", "register", str(path)), "not valid YAML", "[/tmp/x]]")
    assert "Traceback" not in err and "MarkupError" not in err


def test_missing_file_with_brackets_in_its_name_is_reported(env: RunningCluster, tmp_path: Path) -> None:
    missing = tmp_path / "[/x].yaml"
    _rejected(env.schedctl("dags", "register", str(missing)), str(missing), "No such file")


def test_server_message_quoting_brackets_is_reported(env: RunningCluster, tmp_path: Path) -> None:
    path = tmp_path / "bracket_id.yaml"
    path.write_text(yaml.safe_dump({"dag_id": "[/x]", "tasks": [_task("a")]}))
    _rejected(env.schedctl("dags", "register", str(path)), "INVALID_ARGUMENT", "spec.dag_id: '[/x]'")


def test_client_side_message_keeps_the_input_verbatim(env: RunningCluster) -> None:
    _rejected(env.schedctl("runs", "get", "[bold]x"), "RUN '[bold]x' must be")


# -- runs ------------------------------------------------------------------------------------------------


def test_trigger_unknown_dag_is_not_found(env: RunningCluster, api: Api) -> None:
    before = _state_fast(env, api)
    _rejected(env.schedctl("runs", "trigger", "no_such_dag"), "NOT_FOUND", "no_such_dag")
    error = _rpc_error(api.runs.CreateRun, api_pb2.CreateRunRequest(parent="dags/no_such_dag"))
    assert error.code() == grpc.StatusCode.NOT_FOUND, error
    assert "no_such_dag" in error.details()
    assert _state_fast(env, api) == before


def test_taken_run_id_already_exists(env: RunningCluster, api: Api) -> None:
    before = _state_fast(env, api)
    _rejected(env.schedctl("runs", "trigger", BASE_DAG, "--run-id", "taken"), "ALREADY_EXISTS", "'taken'")
    request = api_pb2.CreateRunRequest(
        parent=f"dags/{BASE_DAG}", run_id="taken", request_id=str(uuid.uuid4())
    )
    error = _rpc_error(api.runs.CreateRun, request)
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS, error
    # without a request id the insert is a statement of its own: the same answer
    plain = _rpc_error(
        api.runs.CreateRun, api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", run_id="taken")
    )
    assert plain.code() == grpc.StatusCode.ALREADY_EXISTS and "'taken'" in plain.details(), plain
    assert _state_fast(env, api) == before


def test_retried_trigger_with_same_request_id_returns_the_same_run(env: RunningCluster, api: Api) -> None:
    request = api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", request_id=str(uuid.uuid4()))
    first = api.runs.CreateRun(request, timeout=RPC_TIMEOUT)
    second = api.runs.CreateRun(request, timeout=RPC_TIMEOUT)
    assert first.name == second.name
    runs = env.fetch("SELECT run_id FROM dag_runs WHERE dag_id = $1 AND run_id = $2", BASE_DAG, first.run_id)
    assert len(runs) == 1


def test_bad_run_id_is_invalid(env: RunningCluster, api: Api) -> None:
    before = _state_fast(env, api)
    _rejected(env.schedctl("runs", "trigger", BASE_DAG, "--run-id", "a b"), "INVALID_ARGUMENT", "run_id")
    error = _rpc_error(api.runs.CreateRun, api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", run_id="x/y"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert error.details().startswith("run_id: ")
    assert _state_fast(env, api) == before


def test_malformed_run_name(env: RunningCluster, api: Api) -> None:
    _rejected(env.schedctl("runs", "get", "justaname"), "'justaname'", "DAG/RUN_ID")
    _rejected(env.schedctl("runs", "get", "dags/only-a-dag"), "INVALID_ARGUMENT", "name: ", "not a run name")
    for name in ("runs/x", "dags/a/runs", "dags//runs/x", "dags/a/runs/x/extra"):
        error = _rpc_error(api.runs.GetRun, api_pb2.GetRunRequest(name=name))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, error)
        assert error.details().startswith("name: ") and "not a run name" in error.details()
    error = _rpc_error(api.runs.GetRun, api_pb2.GetRunRequest(name=f"dags/{BASE_DAG}/runs/never"))
    assert error.code() == grpc.StatusCode.NOT_FOUND, error
    error = _rpc_error(api.runs.CreateRun, api_pb2.CreateRunRequest(parent="dag/x"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert error.details().startswith("parent: ")


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("[1, 2]", "--conf must be a JSON object"),
        ('"text"', "--conf must be a JSON object"),
        ("{not json", "--conf is not valid JSON"),
    ],
)
def test_conf_must_be_a_json_object(env: RunningCluster, api: Api, conf: str, message: str) -> None:
    before = _state_fast(env, api)
    _rejected(env.schedctl("runs", "trigger", BASE_DAG, "--conf", conf), message)
    assert _state_fast(env, api) == before


def test_an_oversized_conf_is_refused_before_anything_is_stored(env: RunningCluster, api: Api) -> None:
    from google.protobuf.struct_pb2 import Struct

    before = _state_fast(env, api)
    for size in (70 * 1024, 3 * 1024 * 1024):
        conf = Struct()
        conf.update({"blob": "x" * size})
        request = api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", run_id=f"big-{size}", conf=conf)
        error = _rpc_error(api.runs.CreateRun, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
        assert error.details().startswith("conf: is ") and "the limit is 65536" in error.details()
    # Past the servers' 4 MiB per message, the transport refuses it before it is even authenticated.
    conf = Struct()
    conf.update({"blob": "x" * (5 * 1024 * 1024)})
    request = api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", run_id="huge", conf=conf)
    assert _rpc_error(api.runs.CreateRun, request).code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _state_fast(env, api) == before
    # Listing works with a default client (4 MiB of response at most) as before.
    api.runs.ListRuns(api_pb2.ListRunsRequest(parent="dags/-", page_size=1000), timeout=RPC_TIMEOUT)


def test_a_request_id_reused_with_another_body_is_refused(env: RunningCluster, api: Api) -> None:
    request_id = str(uuid.uuid4())
    first = api.runs.CreateRun(
        api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", request_id=request_id), timeout=RPC_TIMEOUT
    )
    before = _state_fast(env, api)
    other = api_pb2.CreateRunRequest(parent=f"dags/{BASE_DAG}", run_id="other", request_id=request_id)
    error = _rpc_error(api.runs.CreateRun, other)
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS, error
    assert request_id in error.details() and "different CreateRun request" in error.details()
    assert _state_fast(env, api) == before
    assert first.run_id != "other"

    spec = json_format.ParseDict(BASE_SPEC, pb.DagSpec())
    api.dags.RegisterDag(api_pb2.RegisterDagRequest(spec=spec, request_id=request_id), timeout=RPC_TIMEOUT)
    changed = copy.deepcopy(BASE_SPEC)
    changed["description"] = "changed"
    spec = json_format.ParseDict(changed, pb.DagSpec())
    error = _rpc_error(api.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec, request_id=request_id))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS, error
    assert "different RegisterDag request" in error.details()


def test_a_huge_bad_id_gets_a_short_message(env: RunningCluster, api: Api) -> None:
    error = _rpc_error(api.dags.GetDag, api_pb2.GetDagRequest(name="dags/" + "é" * 10_000))
    assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), error
    assert len(error.details()) < 300, len(error.details())
    error = _rpc_error(
        api.dags.RegisterDag,
        api_pb2.RegisterDagRequest(spec=pb.DagSpec(dag_id="x" * 10_000, tasks=[pb.TaskSpec(task_id="a")])),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert "(10000 characters)" in error.details() and len(error.details()) < 400


# -- transport -------------------------------------------------------------------------------------------


def test_schedctl_against_nothing_listening_exits_5() -> None:
    address = f"127.0.0.1:{free_port()}"
    for args in (("dags", "list"), ("runs", "get", "d/r")):
        result = schedctl(address, "--timeout", "5", *args, timeout=60)
        assert result.returncode == EXIT_UNAVAILABLE, result.stdout + result.stderr
        assert f"cannot reach the api at {address}" in result.stderr
        assert "Traceback" not in result.stderr


# -- schedules and backfills ---------------------------------------------------------------------------------

SCHEDULED = "e2e_scheduled"


@pytest.fixture(scope="module")
def backfills(env: RunningCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("scheduled") / "scheduled.yaml"
    path.write_text(
        yaml.safe_dump(
            {**BASE_SPEC, "dag_id": SCHEDULED, "schedule": "* * * * *", "start_date": "2025-01-01T00:00:00Z"}
        )
    )
    result = env.schedctl("dags", "register", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    with grpc.insecure_channel(env.api_address) as channel:
        yield api_pb2_grpc.BackfillServiceStub(channel)


def _backfill(
    start: str | None = "2025-01-01T00:00:00Z", end: str | None = "2025-01-01T01:00:00Z", **fields: Any
) -> pb.Backfill:
    raw: dict[str, Any] = dict(fields)
    if start is not None:
        raw["start_date"] = start
    if end is not None:
        raw["end_date"] = end
    return json_format.ParseDict(raw, pb.Backfill())


BAD_BACKFILLS = {
    "no start date": (
        SCHEDULED,
        _backfill(start=None),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backfill.start_date: is required",
    ),
    "no end date": (
        SCHEDULED,
        _backfill(end=None),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backfill.end_date: is required",
    ),
    "end before start": (
        SCHEDULED,
        _backfill(end="2024-12-31T00:00:00Z"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backfill.end_date: is before the start date",
    ),
    "too many intervals": (
        SCHEDULED,
        _backfill(end="2026-01-01T00:00:00Z"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backfill.end_date: the range holds more than 10000 intervals",
    ),
    "negative max_active_runs": (
        SCHEDULED,
        _backfill(max_active_runs=-1),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backfill.max_active_runs: must be between 1 and 1000",
    ),
    "an unknown strategy": (
        SCHEDULED,
        _backfill(strategy=7),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backfill.strategy: unknown strategy 7",
    ),
    "a dag without a schedule": (
        BASE_DAG,
        _backfill(),
        grpc.StatusCode.FAILED_PRECONDITION,
        "has no schedule",
    ),
    "an unknown dag": ("ghost", _backfill(), grpc.StatusCode.NOT_FOUND, "dag 'ghost' not found"),
}


@pytest.mark.parametrize("case", list(BAD_BACKFILLS), ids=list(BAD_BACKFILLS))
def test_bad_backfills_are_refused_and_store_nothing(env: RunningCluster, backfills: Any, case: str) -> None:
    dag_id, request, code, message = BAD_BACKFILLS[case]
    before = env.fetch("SELECT id FROM backfills ORDER BY id")
    error = _rpc_error(
        backfills.CreateBackfill, api_pb2.CreateBackfillRequest(parent=f"dags/{dag_id}", backfill=request)
    )
    assert (error.code(), message in error.details()) == (code, True), error.details()
    assert env.fetch("SELECT id FROM backfills ORDER BY id") == before


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("backfills/x", "is not a backfill name"),
        ("backfills/²", "is not a backfill name"),
        ("runs/1", "is not a backfill name"),
    ],
)
def test_malformed_backfill_names_are_invalid(backfills: Any, name: str, message: str) -> None:
    error = _rpc_error(backfills.GetBackfill, api_pb2.GetBackfillRequest(name=name))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and message in error.details()
    missing = _rpc_error(backfills.CancelBackfill, api_pb2.GetBackfillRequest(name="backfills/999999"))
    assert missing.code() == grpc.StatusCode.NOT_FOUND


def test_schedctl_refuses_a_date_it_cannot_read(env: RunningCluster, backfills: Any) -> None:
    err = _rejected(
        env.schedctl("backfill", "create", SCHEDULED, "--start", "yesterday", "--end", "2025-01-02")
    )
    assert "--start 'yesterday' is not an ISO 8601 date" in err
    err = _rejected(env.schedctl("dags", "next-runs", SCHEDULED, "-n", "1000"), "INVALID_ARGUMENT")
    assert "count: must be between 1 and 100" in err
