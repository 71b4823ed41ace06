"""The writes of one scheduling pass, decided from its plans and admissions: plain data. Pure.

A pass turns its plans (``schedd_core.pass_plan``) into writes in three steps: :func:`ready_candidates`
lists the task instances ready to run, admission (``schedd_core.admission``, fed by the store) picks
those that queue now, and :func:`decide_writes` turns plans and admissions into :class:`PassWrites`,
which the store applies in one fenced transaction, every guarded statement checked against the
number of rows it was meant to change.

What :func:`decide_writes` guarantees, for plans of distinct runs:

- every task in a plan's ``to_create`` (except a placeholder the same plan expands) is created once,
  in its first state: ``queued`` when admitted, ``scheduled`` when ready and not admitted,
  ``skipped``/``upstream_failed`` when the plan says so, else ``none``;
- every existing task instance is named by at most one of the state writes (queue, schedule, skip,
  upstream_failed, fail), and one that waits in its pool already (``scheduled``) is not scheduled
  again;
- a queued run starts; a run whose plan has a ``run_state`` finishes in it, with its run callback
  event when its DAG asks for one; a DAG with ``max_active_runs`` whose run (not a backfill's)
  finishes frees one place (``freed_runs``);
- ``outcome.written`` names, by run, every existing task instance the writes change (created ones
  are added by the store once it knows their ids).

Not decided here: anything about rows the pass did not read (the store checks that each guarded
write changed exactly the rows named, and rolls the pass back otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from schedd_core.admission import Candidate
from schedd_core.mapping import split_key, task_of
from schedd_core.pass_plan import PassRun, PlannedRun
from schedd_core.retry import retry_delay
from schedd_core.sensor_wait import waits_for_poke
from schedd_core.states import RunState, TaskState


@dataclass
class PassOutcome:
    """What a pass did, for the leader's bookkeeping after it commits."""

    queued: int = 0
    #: Task instances the pass created (``schedd_store.planner_statistics`` counts them).
    created: int = 0
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
    #: The successor hand-offs written (``schedd_core.handoffs``), by run: source key -> target key.
    handoffs: dict[int, dict[str, str]] = field(default_factory=dict)


class Ready(NamedTuple):
    """A task instance ready to run: existing (``candidate.ti_id > 0``) or to be created (< 0)."""

    candidate: Candidate
    run: PassRun
    key: str
    new: bool


class NewInstance(NamedTuple):
    """A task instance to create, in its first state."""

    run_pk: int
    task_id: str
    map_index: int
    state: TaskState
    max_tries: int
    priority_weight: int
    pool: str
    pool_slots: int
    queue: str
    branch: bool
    #: The task's callback events, comma-separated.
    events: str


class FailUnrun(NamedTuple):
    """A task instance that fails without running (a mapped task that cannot expand)."""

    run_pk: int
    key: str
    #: None when the pass creates it: the store finds it by ``(run_pk, key)``.
    ti_id: int | None
    error: str


class Retry(NamedTuple):
    ti_id: int
    #: Seconds from now until the retry is due.
    delay: float


class RunFinish(NamedTuple):
    run_pk: int
    state: RunState


class RunEvent(NamedTuple):
    event: str
    run_pk: int
    dag_id: str


@dataclass
class PassWrites:
    """Every write of one pass, in the order the store applies them (fields top to bottom)."""

    #: Placeholders of expanded mapped tasks to delete.
    remove: list[int] = field(default_factory=list)
    create: list[NewInstance] = field(default_factory=list)
    fail_unrun: list[FailUnrun] = field(default_factory=list)
    #: Ready, not admitted: to wait in their pools.
    schedule: list[int] = field(default_factory=list)
    skip: list[int] = field(default_factory=list)
    upstream_failed: list[int] = field(default_factory=list)
    #: Running task instances to fail (their run timed out).
    fail_running: list[int] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)
    start_runs: list[int] = field(default_factory=list)
    finish_runs: list[RunFinish] = field(default_factory=list)
    run_events: list[RunEvent] = field(default_factory=list)
    #: Existing task instances admitted: queued last, with the pass log.
    queue: list[int] = field(default_factory=list)
    #: The runs planned (the pass log's count; none planned and nothing queued: no log entry).
    runs: int = 0
    #: What the pass did, as far as it is known before the writes (the store adds the rest).
    outcome: PassOutcome = field(default_factory=PassOutcome)


def ready_candidates(planned: Iterable[PlannedRun]) -> list[Ready]:
    """The task instances the plans make ready, as admission candidates; those to be created get
    negative keys (-1, -2, ...) in plan order."""
    ready: list[Ready] = []
    next_new_key = -1
    for run, graph, plan in planned:
        new = set(plan.to_create)
        backfill = run.backfill_id is not None
        assert run.logical_date is not None
        for key in plan.to_queue:
            node = graph.nodes[task_of(key)]
            ti_id = run.ti_ids.get(key)
            if ti_id is None:
                ti_id, next_new_key = next_new_key, next_new_key - 1
            candidate = Candidate(
                ti_id=ti_id,
                dag_id=run.dag_id,
                task_id=node.task_id,
                pool=node.pool,
                pool_slots=node.pool_slots,
                priority=node.priority_weight,
                logical_date=run.logical_date,
                backfill=backfill,
            )
            ready.append(Ready(candidate, run, key, key in new))
    return ready


def decide_writes(
    planned: Sequence[PlannedRun],
    ready: Sequence[Ready],
    admitted: Sequence[Candidate],
    waiting_run: dict[int, int],
    jitter: Callable[[], float],
) -> PassWrites:
    """The writes of a pass: ``planned`` and their ``ready`` candidates (:func:`ready_candidates`),
    the candidates ``admitted`` (in admission order; also task instances that waited in their pools,
    whose runs ``waiting_run`` gives by id), and ``jitter()`` (uniform in [0, 1)) for retry delays."""
    writes = PassWrites(runs=len(planned))
    admitted_keys = {c.ti_id for c in admitted}
    run_of_ready = {r.candidate.ti_id: r.run.pk for r in ready}
    for c in admitted:
        if c.ti_id > 0:
            writes.queue.append(c.ti_id)
            _wrote(writes, run_of_ready.get(c.ti_id) or waiting_run[c.ti_id], c.ti_id)
    new_state: dict[tuple[int, str], TaskState] = {}
    for r in ready:
        ti_id = r.candidate.ti_id
        if r.new:
            state = TaskState.QUEUED if ti_id in admitted_keys else TaskState.SCHEDULED
            new_state[(r.run.pk, r.key)] = state
        elif ti_id not in admitted_keys and r.run.tasks[r.key].state is not TaskState.SCHEDULED:
            writes.schedule.append(ti_id)
            _wrote(writes, r.run.pk, ti_id)
    for p in planned:
        _decide_tasks(writes, p, new_state, jitter)
        _decide_run(writes, p)
    return writes


def _wrote(writes: PassWrites, run_pk: int, *ti_ids: int) -> None:
    if ti_ids:
        writes.outcome.written.setdefault(run_pk, set()).update(ti_ids)


def _decide_tasks(
    writes: PassWrites,
    planned: PlannedRun,
    new_state: dict[tuple[int, str], TaskState],
    jitter: Callable[[], float],
) -> None:
    """The task instance writes of one plan (other than queueing and scheduling the ready ones)."""
    run, graph, plan = planned
    ids = run.ti_ids
    new = set(plan.to_create)
    first = {key: TaskState.SKIPPED for key in plan.to_skip if key in new}
    first |= {key: TaskState.UPSTREAM_FAILED for key in plan.to_upstream_failed if key in new}
    removed = set(plan.to_remove)
    for key in plan.to_create:
        if key in removed:
            continue  # a mapped task expanded in the pass that made its placeholder
        task_id, map_index = split_key(key)
        node = graph.nodes[task_id]
        state = new_state.get((run.pk, key)) or first.get(key, TaskState.NONE)
        writes.create.append(
            NewInstance(
                run.pk,
                task_id,
                map_index,
                state,
                node.max_tries,
                node.priority_weight,
                node.pool,
                node.pool_slots,
                node.queue,
                node.branch,
                ",".join(node.callback_events),
            )
        )
    skip = [ids[key] for key in plan.to_skip if key not in new]
    upstream_failed = [ids[key] for key in plan.to_upstream_failed if key not in new]
    fail = [ids[key] for key in plan.to_fail]
    writes.skip += skip
    writes.upstream_failed += upstream_failed
    writes.fail_running += fail
    _wrote(writes, run.pk, *skip, *upstream_failed, *fail)
    for key, error in plan.to_fail_unrun:
        writes.fail_unrun.append(FailUnrun(run.pk, key, ids.get(key), error))
        if key in ids:
            _wrote(writes, run.pk, ids[key])
    if plan.to_remove:
        writes.remove += [ids[key] for key in plan.to_remove if key not in new]
        writes.outcome.expanded_runs.add(run.pk)
    for key in plan.to_schedule_retry:
        policy = graph.nodes[task_of(key)].retry
        writes.retries.append(Retry(ids[key], retry_delay(policy, max(1, run.tries.get(key, 1)), jitter())))
        writes.outcome.deadlines_changed = True
        _wrote(writes, run.pk, ids[key])


def _decide_run(writes: PassWrites, planned: PlannedRun) -> None:
    """The run-level writes of one plan: start, finish, run callback event; and what they free."""
    run, graph, plan = planned
    outcome = writes.outcome
    if any(waits_for_poke(snap) for snap in run.tasks.values()):
        outcome.deadlines_changed = True  # a sensor's next poke: the deadline timer must look again
    if run.state == RunState.QUEUED:
        writes.start_runs.append(run.pk)
        if graph.run_timeout:
            outcome.deadlines_changed = True
    if plan.run_state is None:
        return
    writes.finish_runs.append(RunFinish(run.pk, plan.run_state))
    outcome.finished_runs.add(run.pk)
    outcome.finished_dags.add(run.dag_id)
    if run.backfill_id is not None:
        outcome.finished_backfills.add(run.backfill_id)
    elif graph.max_active_runs:
        outcome.freed_runs[run.dag_id] = outcome.freed_runs.get(run.dag_id, 0) + 1
    event = "success" if plan.run_state is RunState.SUCCESS else "failure"
    if event in graph.run_callback_events:
        writes.run_events.append(RunEvent(event, run.pk, run.dag_id))
