"""Dynamic task mapping in the SDK (``schedd_sdk.mapping``): what ``partial().expand()`` compiles to,
the lists it expands over, a reduce over a mapped task, and what it refuses at definition time."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb
from schedd_core.spec import validate_spec
from schedd_sdk import DAG, DagDefinitionError, DagValidationError, TaskGroup, map_index, shell, task
from tests.unit.sdk_examples import taskflow as f
from tests.unit.sdk_examples.sensors import flag

MODULE = "tests.unit.test_mapping_sdk"


@task
def add(x: int, y: int, *, offset: int = 0) -> int:
    return x + y + offset


@task
def anything(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@task
def positional(x: int, /) -> int:
    return x


@task
def with_runtime(x: int, params: dict[str, Any], context: dict[str, str]) -> int:
    return x


@task.branch
def choose(x: int) -> str:
    return "a"


def by_id(spec: pb.DagSpec) -> dict[str, pb.TaskSpec]:
    return {t.task_id: t for t in spec.tasks}


def expand_of(spec: pb.TaskSpec) -> list[dict[str, Any]]:
    return [json_format.MessageToDict(a, preserving_proto_field_name=True) for a in spec.mapping.expand]


# --- what it compiles to --------------------------------------------------------------------------------


def test_partial_constants_and_options_and_an_upstream_list_compile_to_a_mapped_task() -> None:
    with DAG("mapped") as d:
        numbers = f.numbers()
        scaled = f.total.partial(scale=2, label="x", retries=3, pool="p", task_id="scaled").expand(
            values=numbers
        )
    spec = d.to_spec()  # validated: the server accepts it
    specs = by_id(spec)
    assert scaled.task_id == "scaled" and list(specs) == ["numbers", "scaled"]
    mapped = specs["scaled"]
    assert list(mapped.upstream) == ["numbers"]
    assert mapped.retries == 3 and mapped.pool == "p"
    assert mapped.python.target == "tests.unit.sdk_examples.taskflow:total"
    assert sorted(mapped.python.kwargs) == ["label", "scale"] and not mapped.python.args
    assert mapped.python.kwargs["scale"].literal.number_value == 2
    assert expand_of(mapped) == [{"name": "values", "values": {"result": {"task_id": "numbers"}}}]
    assert not specs["numbers"].HasField("mapping")


def test_literal_lists_tuples_and_keys_of_results_are_expanded_in_order() -> None:
    with DAG("lists") as d:
        parts = f.split(f.numbers())
        add.partial(offset=1).expand(x=[1, 2], y=(10, 20, 30))
        add.expand(x=parts["odd"], y=[{"nested": [None, True]}, "s", 1.5])
        add.expand(x=[], y=[1])
    specs = by_id(d.to_spec())
    assert expand_of(specs["add"]) == [
        {"name": "x", "values": {"literal": [1.0, 2.0]}},
        {"name": "y", "values": {"literal": [10.0, 20.0, 30.0]}},
    ]
    assert expand_of(specs["add__1"]) == [
        {"name": "x", "values": {"result": {"task_id": "split", "key": "odd"}}},
        {"name": "y", "values": {"literal": [{"nested": [None, True]}, "s", 1.5]}},
    ]
    assert list(specs["add__1"].upstream) == ["split"]
    assert specs["add__2"].mapping.expand[0].values.literal.HasField("list_value")  # empty, still a list


def test_passing_a_mapped_task_on_reduces_over_its_instances_and_it_makes_edges() -> None:
    with DAG("reduce") as d:
        with TaskGroup("g"):
            mapped = f.total.expand(values=[[1], [2, 3]])
        combined = f.combine(mapped, second=mapped)
        mapped >> shell("true", task_id="after")
        again = f.total.expand(values=mapped)  # a mapped task's results can be expanded over in turn
    specs = by_id(d.to_spec())
    assert mapped.task_id == "g.total" and specs["g.total"].group == "g"
    assert combined.task_id == "combine" and list(specs["combine"].upstream) == ["g.total"]
    assert specs["combine"].python.args[0].result.task_id == "g.total"
    assert specs["combine"].python.kwargs["second"].result.task_id == "g.total"
    assert not specs["combine"].HasField("mapping")
    assert list(specs["after"].upstream) == ["g.total"]
    assert again.task_id == "total" and expand_of(specs["total"])[0]["values"] == {
        "result": {"task_id": "g.total"}
    }


def test_a_function_with_kwargs_expands_over_any_name_and_option_names_stay_options() -> None:
    with DAG("kw") as d:
        anything.partial(retries=2, fixed=1).expand(anything_goes=[1])
    spec = by_id(d.to_spec())["anything"]
    assert spec.retries == 2 and list(spec.python.kwargs) == ["fixed"]
    assert spec.mapping.expand[0].name == "anything_goes"


def test_expand_without_partial_is_partial_with_nothing() -> None:
    with DAG("a") as first:
        add.expand(x=[1], y=[2])
    with DAG("a") as second:
        add.partial().expand(x=[1], y=[2])
    assert first.to_spec() == second.to_spec()


def test_the_validator_accepts_what_the_sdk_compiles_and_refuses_a_mapped_depends_on_past() -> None:
    with DAG("ok") as d:
        add.expand(x=f.numbers(), y=[1])
    validate_spec(d.to_spec())
    with DAG("past") as bad:
        add.partial(depends_on_past=True).expand(x=[1], y=[2])
    with pytest.raises(
        DagValidationError, match=r"\(task 'add'\): a task with depends_on_past cannot be mapped"
    ):
        bad.to_spec()


def test_map_index_is_the_instance_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDD_MAP_INDEX", raising=False)
    assert map_index() == -1
    monkeypatch.setenv("SCHEDD_MAP_INDEX", "12")
    assert map_index() == 12
    monkeypatch.setenv("SCHEDD_MAP_INDEX", "x")
    with pytest.raises(ValueError, match="SCHEDD_MAP_INDEX is not a map index"):
        map_index()


# --- what it refuses ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("define", "problem"),
    [
        (lambda: add.partial(x=1).expand(), r"add.expand\(\): name at least one argument to expand over"),
        (
            lambda: add.expand(x=[1], z=[2]),
            r"add.expand\(\): z is not a keyword parameter of add\(\) \(those are: x, y, offset\)",
        ),
        (
            lambda: positional.expand(x=[1]),
            r"x is not a keyword parameter of positional\(\) \(those are: none\); only they can be",
        ),
        (
            lambda: add.partial(x=1).expand(x=[1], y=[2]),
            r"add.expand\(\): x is given to both partial\(\) and expand\(\)",
        ),
        (lambda: add.expand(x={"a": 1}, y=[1]), r"cannot expand x=\{'a': 1\}: a dict is not a list"),
        (lambda: add.expand(x="abc", y=[1]), r"cannot expand x='abc': a str is not a list"),
        (lambda: add.expand(x=3, y=[1]), r"cannot expand x=3: an int is not a list"),
        (lambda: add.expand(x={1, 2}, y=[1]), r"cannot expand x=\{1, 2\}: a set is not a list"),
        (lambda: add.expand(x=f.numbers, y=[1]), r"the task function itself: call it, numbers\(\)"),
        (
            lambda: add.expand(x=[f.numbers()], y=[1]),
            r"element 0 of x= is <Task 'numbers'.*, a task's result",
        ),
        (lambda: add.expand(x=[object()], y=[1]), r"x= must hold JSON values: \[0\] is a object"),
        (lambda: add.expand(x=[float("nan")], y=[1]), r"x= must hold JSON values: \[0\] is nan"),
        (lambda: add.expand(x=[1]), r"add\(\): the arguments do not fit .*missing a required argument: 'y'"),
        (
            lambda: with_runtime.expand(x=[1], params=[{}]),
            r"params is passed by the worker; it cannot be expanded",
        ),
        (lambda: anything.expand(context=[{}]), r"context is passed by the worker; it cannot be expanded"),
        (
            lambda: add.expand(x=shell("true", task_id="sh"), y=[1]),
            r"argument x= is the shell task 'sh', which returns no value",
        ),
        (lambda: add.expand(x=[1], y=[1])["k"], r"'add' is a mapped task, whose result is the list"),
        (lambda: add.partial(retries="3"), r"option retries must be an int"),
        (lambda: add.partial(task_id="a b"), r"is not a valid id"),
    ],
)
def test_definition_mistakes_are_refused_naming_the_problem(define: Any, problem: str) -> None:
    with DAG("bad"), pytest.raises(DagDefinitionError, match=problem):
        define()


@pytest.mark.parametrize(
    ("function", "kind"),
    [
        (choose, "a branch task"),
        (flag, "a sensor"),
        (f.make_scratch, "a setup task"),
        (f.drop_scratch, "a teardown task"),
    ],
)
def test_branch_sensor_setup_and_teardown_tasks_cannot_be_mapped(function: Any, kind: str) -> None:
    with DAG("bad"):
        with pytest.raises(DagDefinitionError, match=rf"\.partial\(\): {kind} cannot be mapped"):
            function.partial()
        with pytest.raises(DagDefinitionError, match=rf"{kind} cannot be mapped"):
            function.expand(x=[1])


def test_expand_outside_a_dag_definition_is_refused() -> None:
    partial = add.partial(offset=1)  # a partial is only data: it may be made anywhere
    with pytest.raises(DagDefinitionError, match=r"add.expand\(\) was called outside a DAG definition"):
        partial.expand(x=[1], y=[2])
    with DAG("inside") as d:
        partial.expand(x=[1], y=[2])
    assert by_id(d.to_spec())["add"].python.kwargs["offset"].literal.number_value == 1
    assert f"{MODULE}:add" == by_id(d.to_spec())["add"].python.target
