"""The scheduler's reads and writes, always inside a fenced transaction (see ``fence.py``).

``load_runs`` locks the runs to evaluate and reads their task states;
``apply_plans`` writes the planner's decisions with guarded statements and
queues a NOTIFY for the registries. A guarded statement that changes fewer rows
than planned raises :class:`IllegalTransition`, which rolls the whole
transaction back: either every decision of a pass lands or none does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection

from schedd_core.errors import IllegalTransition
from schedd_core.graph import DagGraph
from schedd_core.planner import RunPlan, TaskSnapshot
from schedd_core.states import RunState, TaskState, allowed_run_sources, allowed_task_sources
from schedd_store import statements as sql


@dataclass
class PlanningRun:
    pk: int
    version_id: int
    state: str
    tasks: dict[str, TaskSnapshot] = field(default_factory=dict)
    ti_ids: dict[str, int] = field(default_factory=dict)


async def unfinished_run_pks(conn: AsyncConnection) -> list[int]:
    return [int(r[0]) for r in (await conn.execute(sql.UNFINISHED_RUNS)).all()]


async def load_runs(conn: AsyncConnection, run_pks: Sequence[int]) -> list[PlanningRun]:
    """Lock the unfinished runs among ``run_pks`` and read the states of their task instances."""
    runs: dict[int, PlanningRun] = {}
    for r in (await conn.execute(sql.LOCK_RUNS_AND_LOAD_TASKS, {"run_pks": list(run_pks)})).all():
        run = runs.get(r.run_pk)
        if run is None:
            run = runs[r.run_pk] = PlanningRun(pk=r.run_pk, version_id=r.dag_version_id, state=r.run_state)
        if r.task_id is not None:
            run.tasks[r.task_id] = TaskSnapshot(TaskState(r.state), retry_due=bool(r.retry_due))
            run.ti_ids[r.task_id] = r.id
    return list(runs.values())


async def apply_plans(
    conn: AsyncConnection, token: int, plans: Sequence[tuple[PlanningRun, DagGraph, RunPlan]]
) -> int:
    """Write every plan of one scheduling pass. Returns the number of task instances queued."""
    creates: dict[str, list[object]] = {
        k: [] for k in ("run_pks", "task_ids", "states", "max_tries", "weights", "pools", "slots", "queues")
    }
    to_queue: list[int] = []
    to_skip: list[int] = []
    to_upstream_failed: list[int] = []
    started: list[int] = []
    finished: list[tuple[int, RunState]] = []

    for run, graph, plan in plans:
        new = set(plan.to_create)
        first_state = {tid: TaskState.QUEUED for tid in plan.to_queue if tid in new}
        first_state |= {tid: TaskState.SKIPPED for tid in plan.to_skip if tid in new}
        first_state |= {tid: TaskState.UPSTREAM_FAILED for tid in plan.to_upstream_failed if tid in new}
        for tid in plan.to_create:
            node = graph.nodes[tid]
            creates["run_pks"].append(run.pk)
            creates["task_ids"].append(tid)
            creates["states"].append(first_state.get(tid, TaskState.NONE).value)
            creates["max_tries"].append(node.max_tries)
            creates["weights"].append(node.priority_weight)
            creates["pools"].append(node.pool)
            creates["slots"].append(node.pool_slots)
            creates["queues"].append(node.queue)
        to_queue += [run.ti_ids[t] for t in plan.to_queue if t not in new]
        to_skip += [run.ti_ids[t] for t in plan.to_skip if t not in new]
        to_upstream_failed += [run.ti_ids[t] for t in plan.to_upstream_failed if t not in new]
        if run.state == RunState.QUEUED:
            started.append(run.pk)
        if plan.run_state is not None:
            finished.append((run.pk, plan.run_state))

    queues: set[str] = set()
    if creates["run_pks"]:
        rows = (await conn.execute(sql.INSERT_TASK_INSTANCES, {**creates, "token": token})).all()
        queues |= {r.queue for r in rows if r.state == TaskState.QUEUED}
    queued = sum(1 for s in creates["states"] if s == TaskState.QUEUED.value)
    if to_queue:
        rows = (
            await conn.execute(
                sql.QUEUE_TASK_INSTANCES,
                {"ids": to_queue, "token": token, "allowed_from": allowed_task_sources(TaskState.QUEUED)},
            )
        ).all()
        _expect("queue", to_queue, rows)
        queues |= {r.queue for r in rows}
        queued += len(rows)
    for target, ids in ((TaskState.SKIPPED, to_skip), (TaskState.UPSTREAM_FAILED, to_upstream_failed)):
        if ids:
            rows = (
                await conn.execute(
                    sql.FINISH_UNRUN_TASK_INSTANCES,
                    {
                        "ids": ids,
                        "target": target.value,
                        "token": token,
                        "allowed_from": allowed_task_sources(target),
                    },
                )
            ).all()
            _expect(target.value, ids, rows)
    if started:
        await conn.execute(sql.START_RUNS, {"run_pks": started, "token": token})
    for pk, state in finished:
        row = (
            await conn.execute(
                sql.FINISH_RUN,
                {
                    "run_pk": pk,
                    "target": state.value,
                    "token": token,
                    "allowed_from": allowed_run_sources(state),
                },
            )
        ).first()
        if row is None:
            raise IllegalTransition(f"run {pk} could not move to {state.value}")
    if plans:
        await conn.execute(
            sql.RECORD_PASS, {"token": token, "runs": len(plans), "queued": queued, "queues": sorted(queues)}
        )
    return queued


def _expect(action: str, ids: list[int], rows: Sequence[object]) -> None:
    if len(rows) != len(ids):
        moved = {r.id for r in rows}  # type: ignore[attr-defined]
        missing = [i for i in ids if i not in moved]
        raise IllegalTransition(f"cannot {action} task instances {missing[:10]}: their state changed")


@dataclass(frozen=True)
class FailedOver:
    ti_id: int
    run_pk: int
    state: str
    queue: str


async def fail_over_lost_attempts(
    conn: AsyncConnection,
    token: int,
    *,
    threshold: float,
    dead_workers: Sequence[str],
    max_lost: int,
    reason: str,
) -> list[FailedOver]:
    """Fail over running attempts with no heartbeat for ``threshold`` seconds or whose worker's
    lease ended: each is queued again with a new attempt (or failed after ``max_lost`` losses).
    Wakes the registries for the queued ones."""
    rows = (
        await conn.execute(
            sql.FAIL_OVER_LOST_ATTEMPTS,
            {
                "threshold": threshold,
                "dead_workers": list(dead_workers),
                "max_lost": max_lost,
                "reason": reason,
                "token": token,
            },
        )
    ).all()
    result = [FailedOver(ti_id=r.id, run_pk=r.run_pk, state=r.state, queue=r.queue) for r in rows]
    if result:
        queues = sorted({f.queue for f in result if f.state == TaskState.QUEUED})
        queued = sum(1 for f in result if f.state == TaskState.QUEUED)
        runs = len({f.run_pk for f in result})
        await conn.execute(
            sql.RECORD_PASS, {"token": token, "runs": runs, "queued": queued, "queues": queues}
        )
    return result


async def seconds_until_heartbeat_due(conn: AsyncConnection, threshold: float) -> float | None:
    """Seconds until the oldest running attempt's heartbeat passes ``threshold``; None if none runs."""
    value = (await conn.execute(sql.SECONDS_UNTIL_HEARTBEAT_DUE, {"threshold": threshold})).scalar()
    return None if value is None else float(value)
