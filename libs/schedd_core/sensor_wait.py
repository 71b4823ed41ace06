"""A reschedule-mode sensor waiting between two pokes: what explain says of it, and when the leader's
timer must look again."""

from __future__ import annotations

from datetime import datetime

from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState


def sensor_wait_reason(try_number: int, next_poke_at: datetime | None, now: datetime) -> str:
    """The reason an ``up_for_reschedule`` task instance is not running: its next poke time."""
    if next_poke_at is None:
        return f"its sensor's condition did not hold yet (try {try_number}); its next poke time is unset"
    seconds = max(0.0, (next_poke_at - now).total_seconds())
    return (
        f"its sensor's condition did not hold yet (try {try_number}): it holds no slot and is waiting "
        f"for its next poke at {next_poke_at.isoformat()} (in {seconds:.1f}s)"
    )


def waits_for_poke(snap: TaskSnapshot) -> bool:
    """A reschedule-mode sensor whose next poke is still to come (the leader's timer must wake for it)."""
    return snap.state is TaskState.UP_FOR_RESCHEDULE and not snap.retry_due
