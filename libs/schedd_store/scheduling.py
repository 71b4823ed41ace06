"""The scheduler's writes, always inside a fenced transaction (see ``fence.py``).

``planning_reads`` locks the runs to evaluate and reads their task states;
``apply_plans`` admits ready task instances under pools and limits and writes
every decision of the pass with guarded statements, then wakes the registries.
A guarded statement that changes fewer rows than planned raises
:class:`IllegalTransition`, which rolls the whole transaction back: either every
decision of a pass lands or none does.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from schedd_core.admission import Candidate
from schedd_core.errors import IllegalTransition
from schedd_core.graph import DagGraph
from schedd_core.mapping import split_key, task_of
from schedd_core.planner import RunPlan
from schedd_core.retry import retry_delay
from schedd_core.sensor_wait import waits_for_poke
from schedd_core.states import RunState, TaskState, allowed_run_sources, allowed_task_sources
from schedd_store import channels, statements as sql
from schedd_store.admission import admit_ready
from schedd_store.fence import FencedConnection
from schedd_store.planning_reads import PlanningRun


@dataclass
class PassOutcome:
    queued: int = 0
    #: Runs that finished in the pass, and their DAGs.
    finished_runs: set[int] = field(default_factory=set)
    finished_dags: set[str] = field(default_factory=set)
    #: DAGs with max_active_runs whose runs (not a backfill's) finished in the pass, with how many: as
    #: many of their queued runs may start now.
    freed_runs: dict[str, int] = field(default_factory=dict)
    #: Backfills with a run that finished in the pass: they may make their next runs.
    finished_backfills: set[int] = field(default_factory=set)
    #: The pass set a retry time or started a run with a timeout: the deadline timer must look again.
    deadlines_changed: bool = False
    #: The task instances the pass wrote (created included), by run (also runs it did not evaluate,
    #: whose waiting task instances it admitted): the leader reads them again before it plans their
    #: runs next.
    written: dict[int, set[int]] = field(default_factory=dict)
    #: Runs in which the pass expanded a mapped task (removed its placeholder): the leader reads them
    #: in full next time.
    expanded_runs: set[int] = field(default_factory=set)


@dataclass
class _Ready:
    """A task instance ready to run: existing (ti_id > 0) or about to be created (ti_id < 0)."""

    candidate: Candidate
    run: PlanningRun
    task_id: str
    new: bool


async def apply_plans(
    conn: FencedConnection,
    token: int,
    plans: Sequence[tuple[PlanningRun, DagGraph, RunPlan]],
    *,
    graph_of: Callable[[int], DagGraph] | None = None,
    load_graphs: Callable[[FencedConnection, set[int]], Any] | None = None,
    rng: random.Random | None = None,
) -> PassOutcome:
    """Write every plan of one scheduling pass, admitting ready task instances under pools and limits.

    ``graph_of(version_id)`` gives the graph of task instances waiting in other runs (for their
    DAG and task limits); ``load_graphs(conn, version_ids)`` makes sure those are available.
    """
    rng = rng or random.Random()
    outcome = PassOutcome()
    ready: list[_Ready] = []
    next_new_key = -1
    graphs_by_dag: dict[str, DagGraph] = {}
    for run, graph, plan in plans:
        graphs_by_dag[run.dag_id] = graph
        new = set(plan.to_create)
        for tid in plan.to_queue:
            node = graph.nodes[task_of(tid)]
            key = run.ti_ids.get(tid)
            if key is None:
                key, next_new_key = next_new_key, next_new_key - 1
            assert run.logical_date is not None
            ready.append(
                _Ready(
                    Candidate(
                        ti_id=key,
                        dag_id=run.dag_id,
                        task_id=node.task_id,
                        pool=node.pool,
                        pool_slots=node.pool_slots,
                        priority=node.priority_weight,
                        logical_date=run.logical_date,
                        backfill=run.backfill_id is not None,
                    ),
                    run,
                    tid,
                    tid in new,
                )
            )

    # Every pass admits, even with nothing newly ready: the runs it evaluates may have freed pool slots
    # or limits that task instances of other runs wait for.
    admitted, waiting_run = await admit_ready(
        conn, [r.candidate for r in ready], graphs_by_dag, graph_of, load_graphs
    )
    admitted_keys = {c.ti_id for c in admitted}

    creates: dict[str, list[object]] = {
        k: []
        for k in (
            "run_pks",
            "task_ids",
            "map_indexes",
            "states",
            "max_tries",
            "weights",
            "pools",
            "slots",
            "queues",
            "branches",
            "events",
        )
    }
    to_queue: list[int] = [c.ti_id for c in admitted if c.ti_id > 0]
    to_schedule: list[int] = [
        r.candidate.ti_id
        for r in ready
        if not r.new
        and r.candidate.ti_id not in admitted_keys
        and r.run.tasks[r.task_id].state is not TaskState.SCHEDULED
    ]
    to_skip: list[int] = []
    to_upstream_failed: list[int] = []
    to_fail: list[int] = []
    #: (run pk, task instance key, error): instances created by the pass are found by key after it.
    fail_unrun: list[tuple[int, str, str]] = []
    to_remove: list[int] = []
    retry_ids: list[int] = []
    retry_delays: list[float] = []
    started: list[int] = []
    finished: list[tuple[int, RunState]] = []
    run_events: list[tuple[str, int, str]] = []
    ready_new = {(r.run.pk, r.task_id): r.candidate.ti_id for r in ready if r.new}

    for run, graph, plan in plans:
        if any(waits_for_poke(snap) for snap in run.tasks.values()):
            outcome.deadlines_changed = True  # a sensor's next poke: the deadline timer must look again
        new = set(plan.to_create)
        first_state = {tid: TaskState.SKIPPED for tid in plan.to_skip if tid in new}
        first_state |= {tid: TaskState.UPSTREAM_FAILED for tid in plan.to_upstream_failed if tid in new}
        for tid in plan.to_create:
            if tid in plan.to_remove:
                continue  # a mapped task expanded in the pass that made its placeholder
            task_id, map_index = split_key(tid)
            node = graph.nodes[task_id]
            state = first_state.get(tid, TaskState.NONE)
            key = ready_new.get((run.pk, tid))
            if key is not None:
                state = TaskState.QUEUED if key in admitted_keys else TaskState.SCHEDULED
            creates["run_pks"].append(run.pk)
            creates["task_ids"].append(task_id)
            creates["map_indexes"].append(map_index)
            creates["states"].append(state.value)
            creates["max_tries"].append(node.max_tries)
            creates["weights"].append(node.priority_weight)
            creates["pools"].append(node.pool)
            creates["slots"].append(node.pool_slots)
            creates["queues"].append(node.queue)
            creates["branches"].append(node.branch)
            creates["events"].append(",".join(node.callback_events))
        to_skip += [run.ti_ids[t] for t in plan.to_skip if t not in new]
        to_upstream_failed += [run.ti_ids[t] for t in plan.to_upstream_failed if t not in new]
        to_fail += [run.ti_ids[t] for t in plan.to_fail]
        fail_unrun += [(run.pk, t, error) for t, error in plan.to_fail_unrun]
        if plan.to_remove:
            to_remove += [run.ti_ids[t] for t in plan.to_remove if t not in new]
            outcome.expanded_runs.add(run.pk)
        for tid in plan.to_schedule_retry:
            failed_try = max(1, run.tries.get(tid, 1))
            retry_ids.append(run.ti_ids[tid])
            retry_delays.append(retry_delay(graph.nodes[task_of(tid)].retry, failed_try, rng.random()))
        if run.state == RunState.QUEUED:
            started.append(run.pk)
            if graph.run_timeout:
                outcome.deadlines_changed = True
        if plan.run_state is not None:
            finished.append((run.pk, plan.run_state))
            outcome.finished_runs.add(run.pk)
            outcome.finished_dags.add(run.dag_id)
            if run.backfill_id is not None:
                outcome.finished_backfills.add(run.backfill_id)
            elif graph.max_active_runs:
                outcome.freed_runs[run.dag_id] = outcome.freed_runs.get(run.dag_id, 0) + 1
            event = "success" if plan.run_state is RunState.SUCCESS else "failure"
            if event in graph.run_callback_events:
                run_events.append((event, run.pk, run.dag_id))

    queues: set[str] = set()
    if to_remove:
        rows = (await conn.execute(sql.REMOVE_PLACEHOLDERS, {"ids": to_remove})).all()
        _expect("remove the placeholders of", to_remove, rows)
    created: dict[tuple[int, str], int] = {}
    if creates["run_pks"]:
        rows = (await conn.execute(sql.INSERT_TASK_INSTANCES, {**creates, "token": token})).all()
        queues |= {r.queue for r in rows if r.state == TaskState.QUEUED}
        outcome.queued += sum(1 for r in rows if r.state == TaskState.QUEUED)
        for r in rows:
            outcome.written.setdefault(r.run_pk, set()).add(r.id)
            created[(r.run_pk, r.task_key)] = r.id
    failed_unrun: list[int] = []
    if fail_unrun:
        ids_of = {run.pk: run.ti_ids for run, _, _ in plans}
        failed_unrun = [ids_of[pk].get(key) or created[(pk, key)] for pk, key, _ in fail_unrun]
        params = {"ids": failed_unrun, "errors": [e[:4000] for _, _, e in fail_unrun], "token": token}
        _expect("fail", failed_unrun, (await conn.execute(sql.FAIL_UNRUN_TASK_INSTANCES, params)).all())
    if to_schedule:
        rows = (
            await conn.execute(
                sql.SCHEDULE_TASK_INSTANCES,
                {"ids": to_schedule, "token": token},
            )
        ).all()
        _expect("schedule", to_schedule, rows)
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
    if to_fail:
        rows = (
            await conn.execute(
                sql.FAIL_RUNNING_TASK_INSTANCES,
                {"ids": to_fail, "token": token, "error": "the run timed out"},
            )
        ).all()
        _expect("fail", to_fail, rows)
        if any(r.events for r in rows):
            await conn.execute(sql.NOTIFY, {"channel": channels.OUTBOX, "payload": ""})
    if retry_ids:
        await conn.execute(sql.SET_RETRY_TIMES, {"ids": retry_ids, "delays": retry_delays, "token": token})
        outcome.deadlines_changed = True
    if started:
        await conn.execute(sql.START_RUNS, {"run_pks": started, "token": token})
    for pk, run_state in finished:
        row = (
            await conn.execute(
                sql.FINISH_RUN,
                {
                    "run_pk": pk,
                    "target": run_state.value,
                    "token": token,
                    "allowed_from": allowed_run_sources(run_state),
                },
            )
        ).first()
        if row is None:
            raise IllegalTransition(f"run {pk} could not move to {run_state.value}")
    if run_events:
        await conn.execute(
            sql.RECORD_RUN_EVENTS,
            {
                "events": [e for e, _, _ in run_events],
                "run_pks": [p for _, p, _ in run_events],
                "dag_ids": [d for _, _, d in run_events],
            },
        )
        await conn.execute(sql.NOTIFY, {"channel": channels.OUTBOX, "payload": ""})
    run_of = {ti: run.pk for run, _, _ in plans for ti in run.ti_ids.values()} | waiting_run
    run_of |= {ti: pk for (pk, _), ti in created.items()}
    for ti in (*to_queue, *to_schedule, *to_skip, *to_upstream_failed, *to_fail, *retry_ids, *failed_unrun):
        outcome.written.setdefault(run_of[ti], set()).add(ti)
    if to_queue:
        # Last, and in one statement with the pass log and the registries' wake-up: the common pass
        # (a task finished, the next one queues) costs one round trip fewer.
        rows = (
            await conn.execute(
                sql.QUEUE_AND_RECORD_PASS,
                {
                    "ids": to_queue,
                    "token": token,
                    "runs": len(plans),
                    "queued_before": outcome.queued,
                    "queues": sorted(queues),
                },
            )
        ).all()
        _expect("queue", to_queue, rows)
        outcome.queued += len(rows)
    elif plans:
        await conn.execute(
            sql.RECORD_PASS,
            {"token": token, "runs": len(plans), "queued": outcome.queued, "queues": sorted(queues)},
        )
    return outcome


def _expect(action: str, ids: list[int], rows: Sequence[object]) -> None:
    if len(rows) != len(ids):
        moved = {r.id for r in rows}  # type: ignore[attr-defined]
        missing = [i for i in ids if i not in moved]
        raise IllegalTransition(f"cannot {action} task instances {missing[:10]}: their state changed")


async def quarantine_run(conn: FencedConnection, token: int, run_pk: int, error: str) -> bool:
    """Fail a run that cannot be planned, saying why; returns whether it was still unfinished."""
    row = (
        await conn.execute(sql.QUARANTINE_RUN, {"run_pk": run_pk, "error": error[:4000], "token": token})
    ).first()
    if row is not None:
        await conn.execute(sql.RECORD_PASS, {"token": token, "runs": 1, "queued": 0, "queues": []})
    return row is not None
