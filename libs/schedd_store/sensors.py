"""The registry's side of sensors: applying a poke that said "not yet" and a soft-fail timeout.

A reschedule-mode sensor's attempt ends after each poke whose condition did not hold: its task
instance goes from ``running`` to ``up_for_reschedule`` (freeing its worker slot and pool slot)
with its next poke time, and the leader queues it again then, in the same try (see
``QUEUE_TASK_INSTANCES``). A soft-fail sensor past its timeout is skipped. Like every worker
report, each change is conditional on the attempt it names and on the reporting worker holding
it: a report of a superseded attempt, or from another worker, changes nothing. Not guaranteed:
that the next poke starts at its time exactly (the leader queues it when its timer fires; a
worker must then claim it).
"""

from __future__ import annotations

from collections.abc import Sequence

from schedd_core.states import AttemptState, TaskState
from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.reports import AttemptResult


def is_sensor_outcome(result: AttemptResult) -> bool:
    """Whether the result is a reschedule or a soft-fail skip (applied here, not as a success or failure)."""
    return result.reschedule_at is not None or result.skipped


def recorded_state(result: AttemptResult) -> str:
    """The state the attempt's history row has once ``result`` was applied (to tell a repeat)."""
    if result.skipped:
        return AttemptState.SKIPPED.value
    if result.reschedule_at is not None:
        return AttemptState.RESCHEDULED.value
    return (AttemptState.SUCCESS if result.succeeded else AttemptState.FAILED).value


async def apply_sensor_outcomes(conn: Connection, results: Sequence[AttemptResult]) -> dict[str, int]:
    """Apply sensor outcomes in the caller's transaction; returns the run of each applied attempt, by
    attempt id (the others were stale or repeated)."""
    if not results:
        return {}
    rows = (
        await conn.execute(
            sql.APPLY_SENSOR_OUTCOMES,
            {
                "ti_ids": [r.ti_id for r in results],
                "attempt_ids": [r.attempt_id for r in results],
                "try_numbers": [r.try_number for r in results],
                "targets": [
                    (TaskState.SKIPPED if r.skipped else TaskState.UP_FOR_RESCHEDULE).value for r in results
                ],
                "errors": [r.error for r in results],
                "started": [r.started_at for r in results],
                "ended": [r.ended_at for r in results],
                "next_pokes": [None if r.skipped else r.reschedule_at for r in results],
                "worker_ids": [r.worker_id for r in results],
            },
        )
    ).all()
    return {str(r.attempt_id): r.run_pk for r in rows}
