"""The request hygiene walk names the exact field of the first broken rule."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from schedd.v1 import api_pb2, resources_pb2 as pb, worker_pb2
from schedd_core.errors import InvalidArgument
from schedd_rpc import convert
from schedd_rpc.hygiene import MAX_VALUE_DEPTH, check_message


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


@pytest.mark.parametrize(
    ("worker_message", "field", "problem"),
    [
        (
            worker_pb2.WorkerMessage(
                results=worker_pb2.TaskResults(
                    results=[
                        worker_pb2.TaskResult(exit_code=0, credit=1),
                        worker_pb2.TaskResult(end_time=timestamp_pb2.Timestamp(seconds=-62135596801)),
                    ]
                )
            ),
            "results.results[1].end_time",
            "is not a time between",
        ),
        (
            worker_pb2.WorkerMessage(
                result=worker_pb2.TaskResult(attempt=worker_pb2.AttemptRef(attempt_id="\x00"))
            ),
            "result.attempt.attempt_id",
            "NUL",
        ),
    ],
)
def test_the_checks_planned_once_per_message_type_still_reach_every_field(
    worker_message: worker_pb2.WorkerMessage, field: str, problem: str
) -> None:
    """The walk skips the integers, booleans and enums of a type it planned once; strings and
    timestamps nested in repeated and singular messages are still checked, every time."""
    for _ in range(2):  # the second walk uses the plan the first one made
        with pytest.raises(InvalidArgument) as caught:
            check_message(worker_message)
        assert caught.value.field == field
        assert problem in caught.value.problem


def test_values_nested_past_the_limit_are_refused_at_any_depth_of_struct_and_list() -> None:
    value: object = "leaf"
    for level in range(MAX_VALUE_DEPTH - 1):  # conf itself is the first level
        value = {"k": value} if level % 2 else [value]
    check_message(api_pb2.CreateRunRequest(conf=convert.struct({"top": value})))
    with pytest.raises(InvalidArgument) as caught:
        check_message(api_pb2.CreateRunRequest(conf=convert.struct({"top": [value]})))
    assert "nested deeper than" in caught.value.problem


def _self_containing_type() -> Any:
    """``message Node { repeated Node children = 1; string name = 2; }``: its children field is
    planned before the type itself is known to hold a string."""
    proto = descriptor_pb2.FileDescriptorProto(name="hygiene_node.proto", package="hygiene_test")
    node = proto.message_type.add(name="Node")
    node.field.add(
        name="children",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type_name=".hygiene_test.Node",
    )
    node.field.add(name="name", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("hygiene_test.Node"))


def test_a_type_that_contains_itself_is_walked_all_the_way_down() -> None:
    node_class = _self_containing_type()
    tree = node_class(name="root")
    tree.children.add(name="a").children.add(name="b\x00")
    with pytest.raises(InvalidArgument) as caught:
        check_message(tree)
    assert caught.value.field == "children[0].children[0].name"
