"""The state machines of task instances, DAG runs, attempts and workers, declared once.

Each ``*_TRANSITIONS`` table maps every target state to the states it may be entered
from. The store turns each transition into one guarded UPDATE
(``WHERE state = ANY(:sources)``, the sources taken from these tables and checked against
them when the statement is defined); nothing checks a state in Python and then writes.
``tests/unit/test_statement_guards.py`` fails on any statement that sets a state without
such a guard.
"""

from __future__ import annotations

import enum


class TaskState(enum.StrEnum):
    NONE = "none"
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    UP_FOR_RETRY = "up_for_retry"
    REMOVED = "removed"
    #: A reschedule-mode sensor between two pokes of one try: it holds no slot until its next poke.
    UP_FOR_RESCHEDULE = "up_for_reschedule"


class RunState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


class RunType(enum.StrEnum):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    BACKFILL = "backfill"
    ASSET_TRIGGERED = "asset_triggered"


T = TaskState

#: target state -> states it may be entered from.
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    T.NONE: frozenset(
        {
            T.SCHEDULED,
            T.QUEUED,
            T.SUCCESS,
            T.FAILED,
            T.SKIPPED,
            T.UPSTREAM_FAILED,
            T.UP_FOR_RETRY,
            T.REMOVED,
            T.UP_FOR_RESCHEDULE,
        }
    ),  # a clear
    T.SCHEDULED: frozenset({T.NONE, T.UP_FOR_RETRY, T.UP_FOR_RESCHEDULE}),
    # RUNNING -> QUEUED: the attempt was lost with its worker and runs again.
    T.QUEUED: frozenset({T.NONE, T.SCHEDULED, T.UP_FOR_RETRY, T.RUNNING, T.UP_FOR_RESCHEDULE}),
    T.RUNNING: frozenset({T.QUEUED}),
    T.SUCCESS: frozenset(
        {
            T.RUNNING,
            T.NONE,
            T.SCHEDULED,
            T.QUEUED,
            T.FAILED,
            T.UPSTREAM_FAILED,
            T.SKIPPED,
            T.UP_FOR_RETRY,
            T.UP_FOR_RESCHEDULE,
        }
    ),  # from a worker, or marked by a user
    T.FAILED: frozenset(
        {
            T.RUNNING,
            T.QUEUED,
            T.NONE,
            T.SCHEDULED,
            T.SUCCESS,
            T.UP_FOR_RETRY,
            T.SKIPPED,
            T.UPSTREAM_FAILED,
            T.UP_FOR_RESCHEDULE,
        }
    ),  # from a worker, a zombie, or a user
    # From QUEUED, UP_FOR_RETRY and UP_FOR_RESCHEDULE too: the run was cancelled or timed out before
    # the task ran (again). From RUNNING: a soft-fail sensor passed its timeout.
    T.SKIPPED: frozenset({T.NONE, T.SCHEDULED, T.QUEUED, T.UP_FOR_RETRY, T.UP_FOR_RESCHEDULE, T.RUNNING}),
    T.UPSTREAM_FAILED: frozenset({T.NONE, T.SCHEDULED}),
    T.UP_FOR_RETRY: frozenset({T.RUNNING, T.QUEUED}),
    T.REMOVED: frozenset({T.NONE, T.SCHEDULED}),
    # A reschedule-mode sensor's poke said "not yet".
    T.UP_FOR_RESCHEDULE: frozenset({T.RUNNING}),
}

#: States in which a task instance will not change again unless a user clears it.
TASK_FINISHED: frozenset[TaskState] = frozenset(
    {T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED, T.REMOVED}
)

#: States that count as "done" for upstream evaluation (trigger rules).
TASK_DONE_FOR_DOWNSTREAM: frozenset[TaskState] = frozenset(
    {T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED}
)

#: States in which an attempt occupies a worker slot and a pool slot.
TASK_OCCUPYING: frozenset[TaskState] = frozenset({T.QUEUED, T.RUNNING})

R = RunState

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    R.QUEUED: frozenset({R.SUCCESS, R.FAILED}),  # a cleared run is queued again
    R.RUNNING: frozenset({R.QUEUED, R.SUCCESS, R.FAILED}),
    R.SUCCESS: frozenset({R.RUNNING, R.QUEUED}),
    R.FAILED: frozenset({R.RUNNING, R.QUEUED}),
}

RUN_FINISHED: frozenset[RunState] = frozenset({R.SUCCESS, R.FAILED})

#: Task instances that have not run and wait to (again): what cancelling a run or its timeout skips.
WAITING_TO_RUN: frozenset[TaskState] = frozenset(
    {
        TaskState.NONE,
        TaskState.SCHEDULED,
        TaskState.QUEUED,
        TaskState.UP_FOR_RETRY,
        TaskState.UP_FOR_RESCHEDULE,
    }
)


class AttemptState(enum.StrEnum):
    """One row of ``task_attempts``: created ``running`` when a registry claims the task instance."""

    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    #: Failed over: the worker died, was cut off, or handed the attempt back.
    LOST = "lost"
    #: A reschedule-mode sensor's poke said "not yet"; the next poke is a new attempt of the same try.
    RESCHEDULED = "rescheduled"
    #: A soft-fail sensor passed its timeout.
    SKIPPED = "skipped"


A = AttemptState

ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    A.RUNNING: frozenset(),  # only created so
    A.SUCCESS: frozenset({A.RUNNING}),
    A.FAILED: frozenset({A.RUNNING}),
    A.LOST: frozenset({A.RUNNING}),
    A.RESCHEDULED: frozenset({A.RUNNING}),
    A.SKIPPED: frozenset({A.RUNNING}),
}


class WorkerState(enum.StrEnum):
    ACTIVE = "active"
    #: Takes no new work; finishes or hands back what it runs.
    DRAINING = "draining"
    #: Its stream ended (it may come back: a hello makes it active again).
    GONE = "gone"


W = WorkerState

WORKER_TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    W.ACTIVE: frozenset({W.ACTIVE, W.DRAINING, W.GONE}),  # a hello (a new incarnation is not draining)
    W.DRAINING: frozenset({W.ACTIVE, W.DRAINING, W.GONE}),  # asked to drain, or a hello while draining
    W.GONE: frozenset({W.ACTIVE, W.DRAINING}),
}


class BackfillState(enum.StrEnum):
    """A backfill: created ``running``; the leader ends it, a user pauses, resumes or cancels it."""

    RUNNING = "running"
    #: Makes no new runs until resumed; its runs in flight go on.
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


B = BackfillState

BACKFILL_TRANSITIONS: dict[BackfillState, frozenset[BackfillState]] = {
    B.RUNNING: frozenset({B.PAUSED}),  # resumed
    B.PAUSED: frozenset({B.RUNNING}),
    B.SUCCEEDED: frozenset({B.RUNNING}),
    B.FAILED: frozenset({B.RUNNING}),
    B.CANCELLED: frozenset({B.RUNNING, B.PAUSED}),
}


def allowed_task_sources(target: TaskState) -> list[str]:
    """The states a task instance may move to ``target`` from, as plain strings for SQL."""
    return sorted(s.value for s in TASK_TRANSITIONS[target])


def allowed_run_sources(target: RunState) -> list[str]:
    return sorted(s.value for s in RUN_TRANSITIONS[target])


def can_transition(source: TaskState, target: TaskState) -> bool:
    return source in TASK_TRANSITIONS[target]
