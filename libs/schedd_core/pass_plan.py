"""Which runs a scheduling pass plans, and how: the run-level rules of a pass. Pure.

The leader reads the runs of a pass (locked), the running runs of the DAGs that limit them and the
states their ``depends_on_past`` tasks have in the previous runs; then these functions decide:

- **Order.** Runs are considered oldest logical date first (runs without one last), so when a DAG's
  ``max_active_runs`` lets only some of its queued runs start, the oldest start.
- **max_active_runs.** A queued run (not a backfill's: a backfill limits its own runs by making no
  more than its limit at once) of a DAG with ``max_active_runs`` starts only while fewer than that
  many runs of its DAG run, counting those read (``running``) and those this pass starts; otherwise
  it is not planned and waits until a run of its DAG ends (:func:`limited_dags` names the DAGs whose
  running runs the caller must read).
- **Paused DAGs.** Nothing of a paused DAG's run starts; its plan is kept only when it finishes the
  run (every task done) without queueing or expanding anything.
- **Run timeouts.** A run that has run for its DAG's ``dagrun_timeout`` or longer is planned by
  :func:`schedd_core.planner.plan_timeout` (it fails, its running attempts fail, the rest is skipped).
- **What is written.** A plan that changes nothing is dropped, unless its run is queued (it starts).

A plan that needs the lengths of what a mapped task expands over lists the task in ``to_measure``:
the caller measures them (:func:`to_measure`) and :func:`finish_plans` plans those runs again.

Not decided here: which ready task instances queue now (``schedd_core.admission``) and the writes
themselves (``schedd_core.pass_writes``). Nothing here reads a clock: a run's age is read with the
run, by the database's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import NamedTuple, Protocol

from schedd_core.deadlines import run_timed_out
from schedd_core.graph import DagGraph
from schedd_core.planner import MapLengths, RunPlan, TaskSnapshot, plan_run, plan_timeout
from schedd_core.states import RunState, TaskState


class PassRun(Protocol):
    """What a pass knows of one run it evaluates (``schedd_store.planning_reads.PlanningRun``)."""

    @property
    def pk(self) -> int: ...
    @property
    def version_id(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def dag_id(self) -> str: ...
    @property
    def logical_date(self) -> datetime | None: ...
    #: Seconds since the run started; None before it started.
    @property
    def age(self) -> float | None: ...
    @property
    def paused(self) -> bool: ...
    @property
    def backfill_id(self) -> int | None: ...
    #: Raised by every manual change of the run (clear, mark, cancel, a backfill's rerun).
    @property
    def control_version(self) -> int: ...
    #: By task instance key: the task id, or ``task_id[i]`` for a mapped task's instance.
    @property
    def tasks(self) -> Mapping[str, TaskSnapshot]: ...
    @property
    def ti_ids(self) -> Mapping[str, int]: ...
    @property
    def tries(self) -> Mapping[str, int]: ...
    #: The task instance keys read again for an incremental plan; None when read in full.
    @property
    def changed(self) -> Collection[str] | None: ...


class PlannedRun(NamedTuple):
    run: PassRun
    graph: DagGraph
    plan: RunPlan


GraphOf = Callable[[int], DagGraph]
#: By run pk: the state of each depends_on_past task in the DAG's previous run.
PastStates = Mapping[int, Mapping[str, TaskState]]


def _held_by_dag_limit(run: PassRun, graph: DagGraph) -> bool:
    """A run that counts against its DAG's max_active_runs when it starts."""
    return run.state == RunState.QUEUED and run.backfill_id is None and graph.max_active_runs > 0


def limited_dags(runs: Iterable[PassRun], graph_of: GraphOf) -> list[str]:
    """The DAGs whose running runs (not a backfill's) the caller must count for :func:`plan_runs`:
    those with max_active_runs and a queued run, of an unpaused DAG, among ``runs``."""
    return sorted({r.dag_id for r in runs if not r.paused and _held_by_dag_limit(r, graph_of(r.version_id))})


def plan_runs(
    runs: Iterable[PassRun],
    graph_of: GraphOf,
    *,
    running: Mapping[str, int],
    past: PastStates,
    max_map_length: int,
) -> list[PlannedRun]:
    """Plan the runs of one pass, oldest first, under the run-level rules (module docstring).

    ``running`` holds, for the DAGs :func:`limited_dags` named, how many of their runs (not a
    backfill's) are running (a DAG missing: none). Runs held back by max_active_runs and paused runs
    that do not finish are left out of the result.
    """
    room = dict(running)
    planned: list[PlannedRun] = []
    for run in sorted(runs, key=lambda r: (r.logical_date is None, r.logical_date)):
        graph = graph_of(run.version_id)
        if run.paused:
            plan = _plan(graph, run, past, None, max_map_length)
            if plan.run_state is not None and not plan.to_queue and not plan.to_measure:
                planned.append(PlannedRun(run, graph, plan))
            continue
        if _held_by_dag_limit(run, graph):
            if room.get(run.dag_id, 0) >= graph.max_active_runs:
                continue  # waits until a run of its DAG ends
            room[run.dag_id] = room.get(run.dag_id, 0) + 1
        if graph.run_timeout and run.age is not None and run_timed_out(run.age, graph.run_timeout):
            plan = plan_timeout(graph, run.tasks)
        else:
            plan = _plan(graph, run, past, None, max_map_length)
        planned.append(PlannedRun(run, graph, plan))
    return planned


def to_measure(planned: Iterable[PlannedRun]) -> list[tuple[int, DagGraph, str]]:
    """The mapped tasks whose expanded arguments the caller must measure: ``(run pk, graph, task id)``."""
    return [(p.run.pk, p.graph, tid) for p in planned for tid in p.plan.to_measure]


def finish_plans(
    planned: Iterable[PlannedRun],
    *,
    past: PastStates,
    map_lengths: Mapping[int, MapLengths],
    max_map_length: int,
) -> list[PlannedRun]:
    """The plans to write: runs that measured mapped tasks planned again with ``map_lengths`` (by run
    pk), and plans that change nothing dropped unless their run is queued (it starts)."""
    result: list[PlannedRun] = []
    for run, graph, plan in planned:
        if plan.to_measure:
            plan = _plan(graph, run, past, map_lengths.get(run.pk, {}), max_map_length)
        if not plan.empty or run.state == RunState.QUEUED:
            result.append(PlannedRun(run, graph, plan))
    return result


def _plan(
    graph: DagGraph,
    run: PassRun,
    past: PastStates,
    map_lengths: MapLengths | None,
    max_map_length: int,
) -> RunPlan:
    return plan_run(
        graph,
        run.tasks,
        past.get(run.pk),
        focus=run.changed,
        map_lengths=map_lengths,
        max_map_length=max_map_length,
    )
