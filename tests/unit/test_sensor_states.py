"""The up_for_reschedule state: its transitions, the statements that move it, and how the planner,
a run's timeout and explain treat a sensor waiting for its next poke."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedd_core.planner import TaskSnapshot, plan_run, plan_timeout
from schedd_core.sensor_wait import sensor_wait_reason, waits_for_poke
from schedd_core.states import (
    ATTEMPT_TRANSITIONS,
    TASK_FINISHED,
    TASK_OCCUPYING,
    TASK_TRANSITIONS,
    AttemptState,
    TaskState,
)
from schedd_store import statements as sql
from schedd_store.statements.guards import GUARDS
from tests.unit.helpers import graph, task

T = TaskState


def test_up_for_reschedule_is_entered_only_from_a_running_attempt() -> None:
    assert TASK_TRANSITIONS[T.UP_FOR_RESCHEDULE] == {T.RUNNING}


def test_a_waiting_sensor_is_unfinished_and_holds_no_slot() -> None:
    assert T.UP_FOR_RESCHEDULE not in TASK_FINISHED
    assert T.UP_FOR_RESCHEDULE not in TASK_OCCUPYING


def test_up_for_reschedule_leads_to_its_next_poke_a_clear_a_mark_or_a_skip() -> None:
    exits = {t for t in TaskState if T.UP_FOR_RESCHEDULE in TASK_TRANSITIONS[t]}
    assert exits == {T.SCHEDULED, T.QUEUED, T.NONE, T.SUCCESS, T.FAILED, T.SKIPPED}


def test_a_poke_attempt_ends_rescheduled_or_skipped() -> None:
    assert ATTEMPT_TRANSITIONS[AttemptState.RESCHEDULED] == {AttemptState.RUNNING}
    assert ATTEMPT_TRANSITIONS[AttemptState.SKIPPED] == {AttemptState.RUNNING}


def test_the_sensor_statement_moves_only_running_attempts_of_the_current_attempt() -> None:
    moves = GUARDS[sql.APPLY_SENSOR_OUTCOMES.text]
    assert moves["ti"] == (frozenset({"running"}), frozenset({"up_for_reschedule", "skipped"}))
    assert moves["attempt"] == (frozenset({"running"}), frozenset({"rescheduled", "skipped"}))
    text = sql.APPLY_SENSOR_OUTCOMES.text
    assert "ti.attempt_id = r.attempt_id AND ti.try_number = r.try_number" in text


def test_queueing_a_next_poke_keeps_the_try_number() -> None:
    for statement in (sql.QUEUE_TASK_INSTANCES, sql.QUEUE_AND_RECORD_PASS):
        assert "try_number + CASE WHEN first_poke_at IS NULL THEN 1 ELSE 0 END" in statement.text
        assert "up_for_reschedule" in GUARDS[statement.text]["ti"][0]
    assert "up_for_reschedule" in GUARDS[sql.SCHEDULE_TASK_INSTANCES.text]["ti"][0]
    assert "first_poke_at = NULL" in sql.APPLY_RESULTS.text, "a finished try forgets its first poke"
    assert "first_poke_at = NULL" in sql.CLEAR_TASK_INSTANCES.text


def test_the_leader_wakes_for_due_pokes() -> None:
    assert "up_for_reschedule" in sql.NEXT_RETRY.text
    assert "up_for_reschedule" in sql.DUE_RETRY_RUNS.text


def test_the_planner_queues_a_sensor_whose_poke_is_due_and_leaves_one_that_is_not() -> None:
    g = graph(task("sense"), task("after", "sense"))
    due = plan_run(
        g, {"sense": TaskSnapshot(T.UP_FOR_RESCHEDULE, retry_due=True), "after": TaskSnapshot(T.NONE)}
    )
    assert due.to_queue == ["sense"]
    assert due.run_state is None
    waiting = plan_run(g, {"sense": TaskSnapshot(T.UP_FOR_RESCHEDULE), "after": TaskSnapshot(T.NONE)})
    assert waiting.to_queue == []
    assert waiting.to_skip == [] and waiting.to_upstream_failed == []
    assert waiting.run_state is None, "a run does not finish while a sensor waits"


def test_a_run_timeout_skips_a_waiting_sensor() -> None:
    g = graph(task("sense"))
    assert plan_timeout(g, {"sense": TaskSnapshot(T.UP_FOR_RESCHEDULE)}).to_skip == ["sense"]


def test_waits_for_poke() -> None:
    assert waits_for_poke(TaskSnapshot(T.UP_FOR_RESCHEDULE))
    assert not waits_for_poke(TaskSnapshot(T.UP_FOR_RESCHEDULE, retry_due=True))
    assert not waits_for_poke(TaskSnapshot(T.UP_FOR_RETRY))


def test_explain_names_the_next_poke_time() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    reason = sensor_wait_reason(1, now + timedelta(seconds=30), now)
    assert "waiting for its next poke at 2026-01-01T12:00:30+00:00" in reason
    assert "in 30.0s" in reason
    assert "unset" in sensor_wait_reason(1, None, now)
