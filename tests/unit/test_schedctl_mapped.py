"""schedctl and mapped tasks, against the in-process fake of the api (``fake_schedctl_api``):
instances shown as ``task_id[i]`` (a big mapped task summarised in a table, listed in full with
``-o wide`` and in JSON), commands taking ``TASK[N]`` or ``TASK --map-index N``, and malformed ones
refused with exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import EXIT_REJECTED
from schedd.v1 import api_pb2, resources_pb2 as pb
from tests.unit.fake_schedctl_api import FakeApi, invoke, serve

RUN = "dags/fan/runs/r1"
FAILED = {3, 7}


def _instance(task_id: str, map_index: int, state: pb.TaskState.ValueType) -> pb.TaskInstance:
    key = task_id if map_index < 0 else f"{task_id}[{map_index}]"
    return pb.TaskInstance(name=f"{RUN}/tasks/{key}", task_id=task_id, map_index=map_index, state=state)


def _mapped_run() -> pb.DagRun:
    """src, process expanded into 12 instances (2 of them failed), done."""
    instances = [_instance("src", -1, pb.TASK_STATE_SUCCESS)]
    instances += [
        _instance("process", i, pb.TASK_STATE_FAILED if i in FAILED else pb.TASK_STATE_SUCCESS)
        for i in range(12)
    ]
    instances.append(_instance("done", -1, pb.TASK_STATE_UPSTREAM_FAILED))
    return pb.DagRun(name=RUN, dag_id="fan", run_id="r1", state=pb.RUN_STATE_FAILED, task_instances=instances)


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[str, FakeApi]]:
    for address, fake in serve():
        fake.runs[RUN] = _mapped_run()
        yield address, fake


def changes(api: tuple[str, FakeApi]) -> list[Any]:
    """The requests the fake got other than reads of the run."""
    return [r for r in api[1].requests if not isinstance(r, api_pb2.GetRunRequest)]


def test_a_big_mapped_task_is_summarised_in_a_table(api: tuple[str, FakeApi]) -> None:
    shown = invoke(api, "runs", "get", "fan/r1")
    assert shown.exit_code == 0, shown.output
    assert "12 instances: 10 success, 2 failed" in shown.stdout
    assert "process[3]" in shown.stdout and "process[7]" in shown.stdout
    assert "process[0]" not in shown.stdout, "succeeded instances of a summarised task are not listed"
    assert "-o wide lists all" in shown.stdout
    wide = invoke(api, "-o", "wide", "runs", "get", "fan/r1")
    assert all(f"process[{i}]" in wide.stdout for i in range(12))
    assert "instances:" not in wide.stdout


def test_json_holds_every_instance_with_its_map_index(api: tuple[str, FakeApi]) -> None:
    shown = invoke(api, "-o", "json", "runs", "get", "fan/r1")
    assert shown.exit_code == 0, shown.output
    instances = json.loads(shown.stdout)["task_instances"]
    assert [(t["task_id"], t["map_index"]) for t in instances] == [
        ("src", -1),
        *[("process", i) for i in range(12)],
        ("done", -1),
    ]
    assert instances[4]["name"] == f"{RUN}/tasks/process[3]"


@pytest.mark.parametrize(
    "command",
    [
        ("tasks", "result", "fan/r1", "process[3]"),
        ("tasks", "result", "fan/r1", "process", "--map-index", "3"),
        ("tasks", "result", "fan/r1", "process", "-m", "3"),
        ("tasks", "logs", "fan/r1", "process", "--map-index", "3"),
        ("tasks", "mark-success", "fan/r1", "process", "--map-index", "3"),
        ("tasks", "mark-failed", "fan/r1", "process[3]"),
        ("explain", "fan/r1", "process", "--map-index", "3"),
        ("tasks", "result", "fan/r1", "process[3]", "--map-index", "-1"),
    ],
)
def test_commands_name_one_instance(api: tuple[str, FakeApi], command: tuple[str, ...]) -> None:
    done = invoke(api, *command)
    assert done.exit_code == 0, done.output
    assert [r.name for r in changes(api)] == [f"{RUN}/tasks/process[3]"]


def test_explain_shows_the_key(api: tuple[str, FakeApi]) -> None:
    assert invoke(api, "explain", "fan/r1", "process", "-m", "7").stdout.startswith("process[7]: failed")


def test_clear_takes_keys_or_a_task_with_map_indexes(api: tuple[str, FakeApi]) -> None:
    done = invoke(api, "tasks", "clear", "fan/r1", "process", "--map-index", "1", "-m", "4")
    assert done.exit_code == 0, done.output
    assert list(changes(api)[0].task_ids) == ["process[1]", "process[4]"]
    assert "cleared: process[1], process[4]" in done.stdout
    done = invoke(api, "tasks", "clear", "fan/r1", "process[2]", "src", "--downstream")
    assert done.exit_code == 0, done.output
    assert list(changes(api)[0].task_ids) == ["process[2]", "src"]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (("tasks", "result", "fan/r1", "process[x]"), "must be a task id or TASK[N]"),
        (("tasks", "result", "fan/r1", "process[01]"), "must be a task id or TASK[N]"),
        (("tasks", "logs", "fan/r1", "process[-1]"), "must be a task id or TASK[N]"),
        (("tasks", "mark-success", "fan/r1", "process[1]", "-m", "2"), "has a map index already"),
        (("explain", "fan/r1", "process", "--map-index", "-2"), "--map-index -2 must be a map index"),
        (("tasks", "clear", "fan/r1", "-m", "1"), "--map-index needs the mapped TASKS"),
        (("tasks", "clear", "fan/r1", "process", "t[1]", "-m", "1"), "has a map index already"),
        (("tasks", "clear", "fan/r1", "process[1"), "must be a task id or TASK[N]"),
        (("tasks", "result", "fan/r1", "process", "--map-index", "x"), "--map-index"),
    ],
)
def test_malformed_instances_are_usage_errors(
    api: tuple[str, FakeApi], command: tuple[str, ...], message: str
) -> None:
    done = invoke(api, *command)
    assert done.exit_code == EXIT_REJECTED, done.output
    assert message in " ".join(done.output.split())
    assert api[1].requests == [], "nothing is sent"
