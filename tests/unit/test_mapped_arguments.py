"""A mapped task instance's expanded arguments on the worker (``schedd_core.mapped_arguments``): each
instance's elements, the cartesian order over several lists, the errors; and the executor handing the
mapping and map index to a real child process."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2

from schedd.v1 import resources_pb2 as pb, worker_pb2
from schedd_core.arguments import ArgumentError
from schedd_core.mapped_arguments import resolve_mapped_arguments
from schedd_exec.executor import AttemptExecutor
from schedd_exec.outcome import Outcome


def literal(*values: Any) -> pb.Argument:
    value = struct_pb2.Value()
    value.list_value.SetInParent()
    value.list_value.extend(values)
    return pb.Argument(literal=value)


def result(task_id: str, key: str | None = None) -> pb.Argument:
    ref = pb.ResultReference(task_id=task_id)
    if key is not None:
        ref.key = key
    return pb.Argument(result=ref)


def mapping(**lists: pb.Argument) -> pb.TaskMapping:
    return pb.TaskMapping(expand=[pb.MappedArgument(name=k, values=v) for k, v in lists.items()])


def as_json(message: pb.TaskMapping) -> str:
    """What the executor hands the child (``schedd_exec.executor``)."""
    return json_format.MessageToJson(message, preserving_proto_field_name=True)


def resolve(
    message: pb.TaskMapping, index: int | str, upstream: dict[str, Any] | None = None
) -> dict[str, Any]:
    return resolve_mapped_arguments(as_json(message), str(index), upstream or {})


def test_each_instance_gets_its_element_of_a_literal_list_or_an_upstream_result() -> None:
    numbers = mapping(x=literal(1, 2.5, {"a": 3}))
    assert [resolve(numbers, i) for i in range(3)] == [{"x": 1}, {"x": 2.5}, {"x": {"a": 3}}]
    assert isinstance(resolve(numbers, 0)["x"], int)  # an integral number arrives as an int
    files = mapping(path=result("list_files"))
    upstream = {"list_files": ["a.csv", "b.csv"]}
    assert [resolve(files, i, upstream) for i in range(2)] == [{"path": "a.csv"}, {"path": "b.csv"}]
    keyed = mapping(row=result("split", "odd"))
    assert resolve(keyed, 1, {"split": {"odd": [1, 3], "even": [2]}}) == {"row": 3}


def test_several_lists_give_the_cartesian_product_the_last_varying_fastest() -> None:
    xs, ys, zs = [1, 2], ["a", "b", "c"], [True, False]
    message = mapping(x=literal(*xs), y=result("up"), z=literal(*zs))
    got = [resolve(message, i, {"up": ys}) for i in range(12)]
    assert got == [{"x": x, "y": y, "z": z} for x, y, z in itertools.product(xs, ys, zs)]
    assert [list(g) for g in got[:3]] == [["x", "y", "z"]] * 3  # in the mapping's order


@pytest.mark.parametrize(
    ("message", "upstream", "index", "problem"),
    [
        (
            mapping(x=result("up")),
            {"up": {"a": 1}},
            0,
            "cannot expand x=: the result of 'up' is a dict, not a list",
        ),
        (
            mapping(x=result("up")),
            {"up": "abc"},
            0,
            "cannot expand x=: the result of 'up' is a str, not a list",
        ),
        (
            mapping(x=result("up")),
            {},
            0,
            "the result of 'up' is None .no stored result: the task returned None",
        ),
        (
            mapping(x=result("up", "k")),
            {"up": {"k": 3}},
            0,
            r"cannot expand x=: up\['k'\] is an int, not a list",
        ),
        (mapping(x=result("up", "k")), {"up": [1]}, 0, r"argument x=: up\['k'\]: 'up' returned a list"),
        (
            mapping(x=literal(1, 2), y=literal("a")),
            {},
            2,
            r"map index 2 is out of range: the expanded arguments have 2 combinations "
            r"\(x=: 2 elements, y=: 1 elements\)",
        ),
        (
            mapping(x=literal()),
            {},
            0,
            "map index 0 is out of range: the expanded arguments have 0 combinations",
        ),
        (mapping(x=literal(1)), {}, "-1", "SCHEDD_MAP_INDEX is '-1', not a map index"),
        (mapping(x=literal(1)), {}, "", "SCHEDD_MAP_INDEX is '', not a map index"),
    ],
)
def test_a_value_that_is_not_a_list_or_an_index_out_of_range_is_an_argument_error(
    message: pb.TaskMapping, upstream: dict[str, Any], index: int | str, problem: str
) -> None:
    with pytest.raises(ArgumentError, match=problem):
        resolve(message, index, upstream)


def test_text_that_is_not_a_task_mapping_is_an_argument_error() -> None:
    with pytest.raises(ArgumentError, match="SCHEDD_TASK_MAPPING is not a JSON object with a list 'expand'"):
        resolve_mapped_arguments("[1]", "0", {})


# --- through the executor and a real child ----------------------------------------------------------------


def elements(path: str, *, scale: int, context: dict[str, str]) -> dict[str, Any]:
    """A mapped task's callable: what it was called with."""
    return {"path": path, "scale": scale, "map_index": context.get("SCHEDD_MAP_INDEX")}


async def run(assignment: worker_pb2.Assignment) -> Outcome:
    outcomes: asyncio.Queue[Outcome] = asyncio.Queue()
    executor = AttemptExecutor(python_workers=1, on_done=lambda _, outcome: outcomes.put_nowait(outcome))
    await executor.start()
    try:
        executor.submit(assignment)
        return await asyncio.wait_for(outcomes.get(), 30)
    finally:
        await executor.close()


def assignment(map_index: int, upstream: dict[str, Any]) -> worker_pb2.Assignment:
    a = worker_pb2.Assignment(
        attempt=worker_pb2.AttemptRef(attempt_id=f"attempt-{map_index}", try_number=1),
        task_id="count",
        python=pb.PythonCallable(
            target=f"{__name__}:elements",
            kwargs={"scale": pb.Argument(literal=struct_pb2.Value(number_value=3))},
        ),
        upstream_results_json=json.dumps(upstream),
        map_index=map_index,
    )
    a.mapping.CopyFrom(mapping(path=result("list_files")))
    return a


async def test_the_executor_passes_the_map_index_and_the_child_calls_with_the_element() -> None:
    outcome = await run(assignment(1, {"list_files": ["a.csv", "b.csv"]}))
    assert outcome.succeeded, outcome.error
    assert json.loads(outcome.result_json) == {"path": "b.csv", "scale": 3, "map_index": "1"}


async def test_an_instance_past_the_end_of_its_list_fails_naming_the_argument() -> None:
    outcome = await run(assignment(2, {"list_files": ["a.csv", "b.csv"]}))
    assert not outcome.succeeded
    assert "map index 2 is out of range: the expanded arguments have 2 combinations (path=: 2 elements)" in (
        outcome.error
    )
