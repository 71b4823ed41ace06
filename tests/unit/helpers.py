"""Builders shared by the unit tests: small DAG specs and planner snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.explain import ExplainFacts
from schedd_core.graph import DagGraph
from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState


def task(task_id: str, *upstream: str, **options: Any) -> pb.TaskSpec:
    """A shell task running ``true`` unless ``options`` name another action."""
    if "shell" not in options and "python" not in options:
        options["shell"] = pb.ShellCommand(command="true")
    return pb.TaskSpec(task_id=task_id, upstream=list(upstream), **options)


def dag(*tasks: pb.TaskSpec, dag_id: str = "d", **options: Any) -> pb.DagSpec:
    return pb.DagSpec(dag_id=dag_id, tasks=list(tasks), **options)


def graph(*tasks: pb.TaskSpec) -> DagGraph:
    return DagGraph.from_spec(dag(*tasks))


def snaps(
    states: Mapping[str, TaskState], *, retry_due: frozenset[str] = frozenset()
) -> dict[str, TaskSnapshot]:
    return {tid: TaskSnapshot(state, retry_due=tid in retry_due) for tid, state in states.items()}


TRIGGER_RULES: tuple[int, ...] = tuple(v for v in pb.TriggerRule.values() if v != pb.TRIGGER_RULE_UNSPECIFIED)


@st.composite
def dag_specs(draw: st.DrawFn, *, max_tasks: int = 12, trigger_rules: bool = False) -> pb.DagSpec:
    """Random acyclic DAGs: task ``t{j}`` may depend only on tasks ``t{i}`` with ``i < j``; with
    ``trigger_rules``, random rules, setup tasks and teardowns.

    Upstream lists and the order of tasks in the spec are shuffled, so nothing depends on the
    spec listing tasks upstream-first.
    """
    n = draw(st.integers(min_value=1, max_value=max_tasks))
    tasks = []
    for j in range(n):
        ups: list[int] = draw(st.lists(st.integers(0, j - 1), unique=True, max_size=4)) if j else []
        options: dict[str, Any] = {}
        if trigger_rules:
            options["trigger_rule"] = draw(st.sampled_from(TRIGGER_RULES))
            # all_done_setup_success is the rule of teardowns (and only theirs); some others are setups
            if options["trigger_rule"] == pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS:
                options["teardown"] = True
            else:
                options["setup"] = draw(st.sampled_from([False, False, True]))
        tasks.append(task(f"t{j}", *(f"t{i}" for i in ups), **options))
    return dag(*draw(st.permutations(tasks)))


#: The time explanations are computed at.
EXPLAIN_NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def explain_facts(task_id: str, state: TaskState, **overrides: Any) -> ExplainFacts:
    """What explain is told of a task instance of a running run in a free pool, with ``overrides``."""
    base = ExplainFacts(
        task_id=task_id,
        state=state,
        run_state="running",
        paused=False,
        pool="default_pool",
        pool_slots=1,
        pool_total=128,
        pool_used=0,
        dag_active=0,
        task_active=0,
        dag_running_runs=1,
        waiting_ahead=0,
        next_retry_at=None,
        now=EXPLAIN_NOW,
        try_number=0,
        max_tries=1,
        queue="default",
        workers_for_queue=1,
    )
    return replace(base, **overrides)
