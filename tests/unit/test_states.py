"""The task-instance and DAG-run state machines, walked pair by pair."""

from __future__ import annotations

import itertools

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.states import (
    RUN_FINISHED,
    RUN_TRANSITIONS,
    TASK_DONE_FOR_DOWNSTREAM,
    TASK_FINISHED,
    TASK_OCCUPYING,
    TASK_TRANSITIONS,
    RunState,
    TaskState,
    allowed_run_sources,
    allowed_task_sources,
    can_transition,
)

T = TaskState
R = RunState

#: source -> every target it may move to. Written independently of (and transposed from)
#: ``TASK_TRANSITIONS``, which maps target -> sources, so a slip in either shows up.
EXPECTED_TASK_EXITS: dict[TaskState, set[TaskState]] = {
    T.NONE: {T.SCHEDULED, T.QUEUED, T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED, T.REMOVED},
    T.SCHEDULED: {T.NONE, T.QUEUED, T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED, T.REMOVED},
    T.QUEUED: {T.NONE, T.RUNNING, T.SUCCESS, T.FAILED, T.SKIPPED, T.UP_FOR_RETRY},
    T.RUNNING: {T.QUEUED, T.SUCCESS, T.FAILED, T.UP_FOR_RETRY, T.UP_FOR_RESCHEDULE, T.SKIPPED},
    T.SUCCESS: {T.NONE, T.FAILED},
    T.FAILED: {T.NONE, T.SUCCESS},
    T.SKIPPED: {T.NONE, T.SUCCESS, T.FAILED},
    T.UPSTREAM_FAILED: {T.NONE, T.SUCCESS, T.FAILED},
    T.UP_FOR_RETRY: {T.NONE, T.SCHEDULED, T.QUEUED, T.SUCCESS, T.FAILED, T.SKIPPED},
    T.REMOVED: {T.NONE},
    T.UP_FOR_RESCHEDULE: {T.NONE, T.SCHEDULED, T.QUEUED, T.SUCCESS, T.FAILED, T.SKIPPED},
}

EXPECTED_RUN_EXITS: dict[RunState, set[RunState]] = {
    R.QUEUED: {R.RUNNING, R.SUCCESS, R.FAILED},  # a run may start and finish in one scheduling pass
    R.RUNNING: {R.SUCCESS, R.FAILED},
    R.SUCCESS: {R.QUEUED, R.RUNNING},
    R.FAILED: {R.QUEUED, R.RUNNING},
}

TASK_PAIRS = list(itertools.product(TaskState, TaskState))
RUN_PAIRS = list(itertools.product(RunState, RunState))


def _exits(source: TaskState) -> set[TaskState]:
    return {t for t in TaskState if can_transition(source, t)}


def _reachable(start: TaskState) -> set[TaskState]:
    seen = {start}
    frontier = [start]
    while frontier:
        for nxt in _exits(frontier.pop()):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


def test_table_covers_every_task_state() -> None:
    assert set(TASK_TRANSITIONS) == set(TaskState)
    assert set(EXPECTED_TASK_EXITS) == set(TaskState)


@pytest.mark.parametrize(("source", "target"), TASK_PAIRS, ids=[f"{s}->{t}" for s, t in TASK_PAIRS])
def test_every_task_pair(source: TaskState, target: TaskState) -> None:
    expected = target in EXPECTED_TASK_EXITS[source]
    assert (source in TASK_TRANSITIONS[target]) is expected
    assert can_transition(source, target) is expected
    assert (source.value in allowed_task_sources(target)) is expected


def test_allowed_task_sources_are_sorted_strings_of_the_table() -> None:
    for target in TaskState:
        sources = allowed_task_sources(target)
        assert sources == sorted(sources)
        assert all(type(s) is str for s in sources)
        assert {TaskState(s) for s in sources} == TASK_TRANSITIONS[target]


def test_no_state_transitions_to_itself() -> None:
    for state in TaskState:
        assert not can_transition(state, state), state


def test_success_is_left_only_by_a_clear_or_a_user_mark_failed() -> None:
    assert _exits(T.SUCCESS) == {T.NONE, T.FAILED}


def test_finished_states_are_left_only_by_a_clear_or_a_user_mark() -> None:
    for state in TASK_FINISHED:
        exits = _exits(state)
        assert T.NONE in exits, f"{state} cannot be cleared"
        assert exits <= {T.NONE, T.SUCCESS, T.FAILED}, f"{state} -> {exits}"


def test_removed_can_only_be_cleared() -> None:
    assert _exits(T.REMOVED) == {T.NONE}


def test_running_is_entered_only_from_queued_and_left_with_an_outcome_or_a_loss() -> None:
    assert TASK_TRANSITIONS[T.RUNNING] == {T.QUEUED}
    # QUEUED again: the attempt was lost with its worker and runs again. UP_FOR_RESCHEDULE and
    # SKIPPED: a sensor's poke said "not yet", or a soft-fail sensor passed its timeout.
    assert _exits(T.RUNNING) == {
        T.QUEUED,
        T.SUCCESS,
        T.FAILED,
        T.UP_FOR_RETRY,
        T.UP_FOR_RESCHEDULE,
        T.SKIPPED,
    }


def test_retry_comes_only_from_an_attempt() -> None:
    assert TASK_TRANSITIONS[T.UP_FOR_RETRY] == {T.QUEUED, T.RUNNING}


def test_every_state_is_reachable_from_none_and_can_get_back() -> None:
    assert _reachable(T.NONE) == set(TaskState)
    for state in TaskState:
        assert T.NONE in _reachable(state), state


def test_planner_decisions_are_legal_transitions() -> None:
    # plan_run queues, skips or marks upstream_failed tasks in NONE or SCHEDULED, and queues due retries.
    for source in (T.NONE, T.SCHEDULED):
        for target in (T.QUEUED, T.SKIPPED, T.UPSTREAM_FAILED):
            assert can_transition(source, target), f"{source}->{target}"
    assert can_transition(T.UP_FOR_RETRY, T.QUEUED)


def test_state_groups_are_consistent() -> None:
    assert TASK_DONE_FOR_DOWNSTREAM <= TASK_FINISHED
    assert not (TASK_OCCUPYING & TASK_FINISHED)
    assert {T.QUEUED, T.RUNNING} == TASK_OCCUPYING
    unfinished = set(TaskState) - TASK_FINISHED
    assert unfinished == {T.NONE, T.SCHEDULED, T.QUEUED, T.RUNNING, T.UP_FOR_RETRY, T.UP_FOR_RESCHEDULE}


def test_task_states_match_the_proto_enum() -> None:
    for state in TaskState:
        assert pb.TaskState.Name(pb.TaskState.Value("TASK_STATE_" + state.name)) == "TASK_STATE_" + state.name
    assert len(pb.TaskState.keys()) == len(TaskState) + 1  # + UNSPECIFIED


def test_run_table_covers_every_run_state() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)


@pytest.mark.parametrize(("source", "target"), RUN_PAIRS, ids=[f"{s}->{t}" for s, t in RUN_PAIRS])
def test_every_run_pair(source: RunState, target: RunState) -> None:
    expected = target in EXPECTED_RUN_EXITS[source]
    assert (source in RUN_TRANSITIONS[target]) is expected
    assert (source.value in allowed_run_sources(target)) is expected


def test_finished_runs_are_left_only_by_a_clear() -> None:
    assert {R.SUCCESS, R.FAILED} == RUN_FINISHED
    for state in RUN_FINISHED:
        exits = {t for t in RunState if state in RUN_TRANSITIONS[t]}
        assert exits <= {R.QUEUED, R.RUNNING}, exits
