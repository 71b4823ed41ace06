"""schedctl and mapped tasks, against an in-process fake of the api's RunService: instances shown as
``task_id[i]`` (a big mapped task summarised in a table, listed in full with ``-o wide`` and in JSON),
commands taking ``TASK[N]`` or ``TASK --map-index N``, and malformed ones refused with exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from typer.testing import CliRunner, Result

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import EXIT_REJECTED, app
from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb

RUN = "dags/fan/runs/r1"
FAILED = {3, 7}


def _instance(task_id: str, map_index: int, state: pb.TaskState.ValueType) -> pb.TaskInstance:
    key = task_id if map_index < 0 else f"{task_id}[{map_index}]"
    return pb.TaskInstance(name=f"{RUN}/tasks/{key}", task_id=task_id, map_index=map_index, state=state)


class FakeRuns:
    """The RunService methods schedctl's task commands call: one run (src, process expanded into 12
    instances, 2 of them failed, done), and the requests it got."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def GetRun(self, request: api_pb2.GetRunRequest, context: grpc.ServicerContext) -> pb.DagRun:
        instances = [_instance("src", -1, pb.TASK_STATE_SUCCESS)]
        instances += [
            _instance("process", i, pb.TASK_STATE_FAILED if i in FAILED else pb.TASK_STATE_SUCCESS)
            for i in range(12)
        ]
        instances.append(_instance("done", -1, pb.TASK_STATE_UPSTREAM_FAILED))
        return pb.DagRun(
            name=RUN, dag_id="fan", run_id="r1", state=pb.RUN_STATE_FAILED, task_instances=instances
        )

    def GetTaskResult(
        self, request: api_pb2.GetTaskResultRequest, context: grpc.ServicerContext
    ) -> api_pb2.StoredTaskResult:
        self.requests.append(request)
        return api_pb2.StoredTaskResult(
            name=f"{request.name}/result", has_value=True, state=pb.TASK_STATE_SUCCESS
        )

    def ClearTaskInstances(
        self, request: api_pb2.ClearTaskInstancesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ClearTaskInstancesResponse:
        self.requests.append(request)
        return api_pb2.ClearTaskInstancesResponse(cleared_task_ids=request.task_ids)

    def SetTaskInstanceState(
        self, request: api_pb2.SetTaskInstanceStateRequest, context: grpc.ServicerContext
    ) -> pb.TaskInstance:
        self.requests.append(request)
        return pb.TaskInstance(name=request.name, state=request.state)

    def ExplainTaskInstance(
        self, request: api_pb2.ExplainTaskInstanceRequest, context: grpc.ServicerContext
    ) -> api_pb2.Explanation:
        self.requests.append(request)
        return api_pb2.Explanation(state=pb.TASK_STATE_FAILED, reasons=["it is finished (failed)"])

    def GetTaskLogs(
        self, request: api_pb2.GetTaskLogsRequest, context: grpc.ServicerContext
    ) -> api_pb2.TaskLogs:
        self.requests.append(request)
        return api_pb2.TaskLogs(data="out\n", next_offset=4, try_number=1, complete=False)


def _handler(fake: FakeRuns) -> grpc.GenericRpcHandler:
    """``fake``'s methods as the RunService's, each with its request type."""
    request_types: dict[str, type[Message]] = {
        "GetRun": api_pb2.GetRunRequest,
        "GetTaskResult": api_pb2.GetTaskResultRequest,
        "ClearTaskInstances": api_pb2.ClearTaskInstancesRequest,
        "SetTaskInstanceState": api_pb2.SetTaskInstanceStateRequest,
        "ExplainTaskInstance": api_pb2.ExplainTaskInstanceRequest,
        "GetTaskLogs": api_pb2.GetTaskLogsRequest,
    }
    return grpc.method_handlers_generic_handler(
        "schedd.v1.RunService",
        {
            method: grpc.unary_unary_rpc_method_handler(
                getattr(fake, method),
                request_deserializer=request_type.FromString,
                response_serializer=lambda message: message.SerializeToString(),
            )
            for method, request_type in request_types.items()
        },
    )


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[str, FakeRuns]]:
    fake = FakeRuns()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers([_handler(fake)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", fake
    server.stop(grace=None)


def cli(api: tuple[str, FakeRuns], *args: str) -> Result:
    api[1].requests.clear()
    return CliRunner().invoke(app, ["--api", api[0], *args])


def test_a_big_mapped_task_is_summarised_in_a_table(api: tuple[str, FakeRuns]) -> None:
    shown = cli(api, "runs", "get", "fan/r1")
    assert shown.exit_code == 0, shown.output
    assert "12 instances: 10 success, 2 failed" in shown.stdout
    assert "process[3]" in shown.stdout and "process[7]" in shown.stdout
    assert "process[0]" not in shown.stdout, "succeeded instances of a summarised task are not listed"
    assert "-o wide lists all" in shown.stdout
    wide = cli(api, "-o", "wide", "runs", "get", "fan/r1")
    assert all(f"process[{i}]" in wide.stdout for i in range(12))
    assert "instances:" not in wide.stdout


def test_json_holds_every_instance_with_its_map_index(api: tuple[str, FakeRuns]) -> None:
    shown = cli(api, "-o", "json", "runs", "get", "fan/r1")
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
def test_commands_name_one_instance(api: tuple[str, FakeRuns], command: tuple[str, ...]) -> None:
    done = cli(api, *command)
    assert done.exit_code == 0, done.output
    assert [r.name for r in api[1].requests] == [f"{RUN}/tasks/process[3]"]


def test_explain_shows_the_key(api: tuple[str, FakeRuns]) -> None:
    assert cli(api, "explain", "fan/r1", "process", "-m", "7").stdout.startswith("process[7]: failed")


def test_clear_takes_keys_or_a_task_with_map_indexes(api: tuple[str, FakeRuns]) -> None:
    done = cli(api, "tasks", "clear", "fan/r1", "process", "--map-index", "1", "-m", "4")
    assert done.exit_code == 0, done.output
    assert list(api[1].requests[0].task_ids) == ["process[1]", "process[4]"]
    assert "cleared: process[1], process[4]" in done.stdout
    done = cli(api, "tasks", "clear", "fan/r1", "process[2]", "src", "--downstream")
    assert done.exit_code == 0, done.output
    assert list(api[1].requests[0].task_ids) == ["process[2]", "src"]


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
    api: tuple[str, FakeRuns], command: tuple[str, ...], message: str
) -> None:
    done = cli(api, *command)
    assert done.exit_code == EXIT_REJECTED, done.output
    assert message in " ".join(done.output.split())
    assert api[1].requests == [], "nothing is sent"
