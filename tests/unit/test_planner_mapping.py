"""plan_run with mapped tasks: expansion, per-instance retries, trigger rules over instances."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import struct_pb2
from hypothesis import given, settings

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.explain import explain
from schedd_core.graph import DagGraph
from schedd_core.mapping import element_indexes, elements_for, instance_key, split_key, task_of
from schedd_core.planner import TaskSnapshot, plan_run, plan_timeout
from schedd_core.spec import validate_spec
from schedd_core.states import RunState, TaskState
from tests.unit.helpers import dag, explain_facts, graph, snaps, task
from tests.unit.planning_histories import Steps, assert_incremental_plans_are_full_plans, histories

T = TaskState


def python(task_id: str, *upstream: str, **options: Any) -> pb.TaskSpec:
    return task(task_id, *upstream, python=pb.PythonCallable(target="m:f"), **options)


def mapped_over(task_id: str, source: str, *upstream: str, **options: Any) -> pb.TaskSpec:
    """A Python task mapped over ``x=`` the result of ``source``."""
    mapping = pb.TaskMapping(
        expand=[pb.MappedArgument(name="x", values=pb.Argument(result=pb.ResultReference(task_id=source)))]
    )
    return python(task_id, source, *upstream, mapping=mapping, **options)


def literal(values: list[Any]) -> pb.Argument:
    value = struct_pb2.Value()
    value.list_value.extend(values)
    return pb.Argument(literal=value)


def fan() -> DagGraph:
    """make -> work (mapped over make's result) -> total."""
    return graph(python("make"), mapped_over("work", "make"), python("total", "work"))


def keys(n: int, tid: str = "work") -> list[str]:
    return [instance_key(tid, i) for i in range(n)]


# --- keys --------------------------------------------------------------------------------------------


def test_instance_keys_round_trip() -> None:
    assert instance_key("t", -1) == "t"
    assert instance_key("t", 12) == "t[12]"
    assert split_key("t[12]") == ("t", 12)
    assert split_key("t") == ("t", -1)
    assert task_of("a.b-c[3]") == "a.b-c"


@pytest.mark.parametrize("bad", ["t[", "t[]", "t[x]", "t[01]", "t[-1]", "[3]", "t]", "t[1]x"])
def test_malformed_keys_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        split_key(bad)


def test_elements_follow_the_cartesian_product_last_argument_fastest() -> None:
    values: list[list[Any]] = [["a", "b"], [1, 2, 3]]
    assert [elements_for(values, i) for i in range(6)] == [
        ["a", 1],
        ["a", 2],
        ["a", 3],
        ["b", 1],
        ["b", 2],
        ["b", 3],
    ]
    assert element_indexes([4], 3) == [3]


# --- expansion ---------------------------------------------------------------------------------------


def test_a_mapped_task_waits_as_one_placeholder_until_its_upstream_succeeds() -> None:
    p = plan_run(fan(), {})
    assert p.to_create == ["make", "work", "total"]
    assert p.to_queue == ["make"]
    assert not p.to_measure


def test_a_ready_mapped_task_asks_for_its_lengths_then_expands_and_queues_every_instance() -> None:
    states = snaps({"make": T.SUCCESS, "work": T.NONE, "total": T.NONE})
    first = plan_run(fan(), states)
    assert first.to_measure == ["work"]
    assert not first.to_queue and first.run_state is None
    p = plan_run(fan(), states, map_lengths={"work": [("x", 3)]})
    assert p.to_remove == ["work"]
    assert p.to_create == keys(3)
    assert p.to_queue == keys(3)
    assert not p.to_measure and p.run_state is None


def test_an_empty_list_skips_the_mapped_task_and_its_downstream_task_follows_its_rule() -> None:
    states = snaps({"make": T.SUCCESS, "work": T.NONE, "total": T.NONE})
    p = plan_run(fan(), states, map_lengths={"work": [("x", 0)]})
    assert p.to_skip == ["work", "total"]  # all_success below a skipped task skips
    assert p.run_state is RunState.SUCCESS


@pytest.mark.parametrize(
    ("lengths", "message"),
    [([("x", None)], "not a list"), ([("x", 1025)], "more than 1024")],
)
def test_a_mapped_task_that_cannot_expand_fails_without_running(
    lengths: list[tuple[str, int | None]], message: str
) -> None:
    states = snaps({"make": T.SUCCESS, "work": T.NONE, "total": T.NONE})
    p = plan_run(fan(), states, map_lengths={"work": lengths})
    assert [key for key, _ in p.to_fail_unrun] == ["work"]
    assert message in p.to_fail_unrun[0][1]
    assert p.to_upstream_failed == ["total"]
    assert p.run_state is RunState.FAILED


def test_the_upper_bound_is_the_callers() -> None:
    states = snaps({"make": T.SUCCESS, "work": T.NONE, "total": T.NONE})
    p = plan_run(fan(), states, map_lengths={"work": [("x", 5)]}, max_map_length=4)
    assert "more than 4" in p.to_fail_unrun[0][1]


def test_literal_lists_expand_in_the_first_pass_of_a_run() -> None:
    mapping = pb.TaskMapping(
        expand=[
            pb.MappedArgument(name="a", values=literal([1, 2])),
            pb.MappedArgument(name="b", values=literal([3])),
        ]
    )
    g = graph(python("work", mapping=mapping))
    first = plan_run(g, {})
    assert first.to_measure == ["work"]
    p = plan_run(g, {}, map_lengths={"work": [("a", 2), ("b", 1)]})
    assert p.to_remove == ["work"]
    assert "work" in p.to_create and p.to_queue == keys(2)


# --- after expansion -----------------------------------------------------------------------------------


def expanded(
    states: dict[str, TaskState], *, retry_due: frozenset[str] = frozenset()
) -> dict[str, TaskSnapshot]:
    return snaps({"make": T.SUCCESS, **states}, retry_due=retry_due)


def test_downstream_waits_for_every_instance_and_runs_once_all_succeeded() -> None:
    running = expanded({"work[0]": T.SUCCESS, "work[1]": T.RUNNING, "total": T.NONE})
    assert plan_run(fan(), running).empty
    done = expanded({"work[0]": T.SUCCESS, "work[1]": T.SUCCESS, "total": T.NONE})
    assert plan_run(fan(), done).to_queue == ["total"]


def test_a_failed_instance_retries_alone() -> None:
    states = expanded(
        {"work[0]": T.SUCCESS, "work[1]": T.UP_FOR_RETRY, "work[2]": T.SUCCESS, "total": T.NONE},
        retry_due=frozenset({"work[1]"}),
    )
    p = plan_run(fan(), states)
    assert p.to_queue == ["work[1]"]
    assert p.run_state is None


def test_a_failed_instance_fails_the_reduce_and_the_run() -> None:
    states = expanded({"work[0]": T.SUCCESS, "work[1]": T.FAILED, "total": T.NONE})
    p = plan_run(fan(), states)
    assert p.to_upstream_failed == ["total"]
    assert p.run_state is RunState.FAILED


def test_trigger_rules_count_each_instance() -> None:
    g = graph(
        python("make"),
        mapped_over("work", "make"),
        python("any_ok", "work", trigger_rule=pb.TRIGGER_RULE_ONE_SUCCESS),
        python("all_done", "work", trigger_rule=pb.TRIGGER_RULE_ALL_DONE),
    )
    states = expanded({"work[0]": T.FAILED, "work[1]": T.SUCCESS, "work[2]": T.RUNNING, "any_ok": T.NONE})
    states["all_done"] = TaskSnapshot(T.NONE)
    p = plan_run(g, states)
    assert p.to_queue == ["any_ok"]  # one instance succeeded; all_done waits for work[2]


def test_a_remembered_placeholder_is_ignored_once_instances_exist() -> None:
    states = expanded({"work": T.NONE, "work[0]": T.SUCCESS, "work[1]": T.SUCCESS, "total": T.SUCCESS})
    assert plan_run(fan(), states).run_state is RunState.SUCCESS


def test_incremental_plans_name_instances() -> None:
    states = expanded({"work[0]": T.SUCCESS, "work[1]": T.SUCCESS, "total": T.NONE})
    assert plan_run(fan(), states, focus=["work[1]"]).to_queue == ["total"]


def test_a_cleared_instance_runs_again_without_expanding_again() -> None:
    states = expanded({"work[0]": T.NONE, "work[1]": T.SUCCESS, "total": T.NONE})
    p = plan_run(fan(), states)
    assert p.to_queue == ["work[0]"]
    assert not p.to_measure and not p.to_remove


def test_a_run_timeout_fails_running_instances_and_skips_waiting_ones() -> None:
    states = expanded({"work[0]": T.RUNNING, "work[1]": T.QUEUED, "total": T.NONE})
    p = plan_timeout(fan(), states)
    assert p.to_fail == ["work[0]"]
    assert sorted(p.to_skip) == ["total", "work[1]"]


# --- validation ------------------------------------------------------------------------------------------


def test_a_valid_mapped_dag_passes_validation() -> None:
    validate_spec(dag(python("make"), mapped_over("work", "make"), python("total", "work")))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (dag(task("make"), task("work", "make", mapping=pb.TaskMapping(expand=[]))), "spec.tasks[1].mapping"),
        (
            dag(python("make"), python("work", "make", mapping=pb.TaskMapping())),
            "spec.tasks[1].mapping.expand",
        ),
        (
            dag(python("make"), python("other"), mapped_over("work", "make", branch=True)),
            "spec.tasks[2].mapping",
        ),
        (
            dag(
                python(
                    "work",
                    mapping=pb.TaskMapping(
                        expand=[
                            pb.MappedArgument(
                                name="x", values=pb.Argument(literal=struct_pb2.Value(string_value="s"))
                            )
                        ]
                    ),
                )
            ),
            "spec.tasks[0].mapping.expand[0].values.literal",
        ),
        (
            dag(
                python("make"),
                python(
                    "work",
                    mapping=pb.TaskMapping(
                        expand=[
                            pb.MappedArgument(
                                name="x", values=pb.Argument(result=pb.ResultReference(task_id="make"))
                            )
                        ]
                    ),
                ),
            ),
            "spec.tasks[1].mapping.expand[0].values.result",
        ),
        (
            dag(
                python(
                    "work",
                    mapping=pb.TaskMapping(
                        expand=[pb.MappedArgument(name="not a name", values=literal([1]))]
                    ),
                )
            ),
            "spec.tasks[0].mapping.expand[0].name",
        ),
    ],
)
def test_bad_mappings_are_refused_naming_the_field(spec: pb.DagSpec, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_spec(spec)
    assert caught.value.field == field


def test_a_failed_instance_of_a_mapped_leaf_fails_the_run() -> None:
    g = graph(python("make"), mapped_over("work", "make"))
    states = snaps({"make": T.SUCCESS, "work[0]": T.SUCCESS, "work[1]": T.FAILED})
    assert plan_run(g, states).run_state is RunState.FAILED
    states = snaps({"make": T.SUCCESS, "work[0]": T.SUCCESS, "work[1]": T.SUCCESS})
    assert plan_run(g, states).run_state is RunState.SUCCESS


def test_a_placeholder_that_failed_to_expand_expands_again_once_cleared() -> None:
    failed = snaps({"make": T.SUCCESS, "work": T.FAILED, "total": T.UPSTREAM_FAILED})
    assert plan_run(fan(), failed).run_state is RunState.FAILED
    cleared = snaps({"make": T.SUCCESS, "work": T.NONE, "total": T.NONE})
    assert plan_run(fan(), cleared).to_measure == ["work"]


# --- incremental planning with mapped tasks ----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(histories(mapped=True))
def test_an_incremental_plan_is_the_full_plan_with_mapped_tasks(history: tuple[DagGraph, Steps]) -> None:
    assert_incremental_plans_are_full_plans(*history)


def test_explain_names_the_unfinished_instances_of_a_mapped_upstream_task() -> None:
    facts = explain_facts("total", T.NONE)
    states = expanded({**{f"work[{i}]": T.SUCCESS for i in range(12)}, "work[3]": T.RUNNING, "total": T.NONE})
    (reason,) = explain(fan(), facts, states)
    assert reason == "trigger rule all_success is not met yet; waiting for upstream work[3] (running)"
    many = expanded({**{f"work[{i}]": T.QUEUED for i in range(12)}, "total": T.NONE})
    (reason,) = explain(fan(), facts, many)
    assert reason.endswith("work[9] (queued) and 2 more")
