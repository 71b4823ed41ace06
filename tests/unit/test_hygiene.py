"""The request hygiene walk names the exact field of the first broken rule."""

from __future__ import annotations

import pytest

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_rpc import convert
from schedd_rpc.hygiene import check_message


def register(spec: pb.DagSpec) -> api_pb2.RegisterDagRequest:
    return api_pb2.RegisterDagRequest(spec=spec)


@pytest.mark.parametrize(
    ("request_message", "field", "problem"),
    [
        (
            register(pb.DagSpec(tasks=[pb.TaskSpec(), pb.TaskSpec(shell=pb.ShellCommand(command="a\x00"))])),
            "spec.tasks[1].shell.command",
            "contains a NUL character",
        ),
        (register(pb.DagSpec(tasks=[pb.TaskSpec(env={"X": "\x00"})])), "spec.tasks[0].env['X']", "NUL"),
        (register(pb.DagSpec(tasks=[pb.TaskSpec(env={"\x00": "v"})])), "spec.tasks[0].env['\\x00']", "NUL"),
        (
            api_pb2.CreateRunRequest(conf=convert.struct({"a": {"b": float("nan")}})),
            "conf.fields['a'].struct_value.fields['b'].number_value",
            "must be a finite number",
        ),
        (api_pb2.CreateRunRequest(parent="dags/\x00"), "parent", "NUL"),
    ],
)
def test_the_first_broken_rule_is_named_by_its_field(
    request_message: object, field: str, problem: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_message(request_message)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert problem in caught.value.problem


def test_a_clean_request_passes() -> None:
    check_message(register(pb.DagSpec(dag_id="d", tasks=[pb.TaskSpec(task_id="a", env={"K": "v"})])))
