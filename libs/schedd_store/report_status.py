"""How a worker's report of an attempt ended: applied, a repeat, stale, or about an attempt the
reporting worker does not hold.

Only the answer to the worker is decided here, after the fact: every change a report makes is
conditional, in its own SQL statement, on the attempt being current and held by the reporting
worker (``schedd_store.dispatch``). This reads what was recorded to tell the refusals apart.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.reports import AttemptResult
from schedd_store.sensors import recorded_state


class ReportStatus(enum.Enum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"  # the same result was applied before
    STALE = "stale"  # the attempt is not current
    NOT_HELD = "not_held"  # the attempt is another worker's


async def recorded_outcomes(
    conn: Connection, results: Sequence[AttemptResult]
) -> dict[str, tuple[str, bool]]:
    """The recorded state of each attempt, and whether the reporting worker holds it, by attempt id."""
    if not results:
        return {}
    rows = (
        await conn.execute(
            sql.ATTEMPT_OUTCOMES,
            {
                "ids": [r.attempt_id for r in results],
                "try_numbers": [r.try_number for r in results],
                "worker_ids": [r.worker_id for r in results],
            },
        )
    ).all()
    return {str(row.attempt_id): (row.state, row.held) for row in rows}


def report_status(
    result: AttemptResult, applied: dict[str, int], lost: set[int], recorded: dict[str, tuple[str, bool]]
) -> ReportStatus:
    """The answer to ``result``, given the attempts applied (by attempt id), the task instances
    marked lost, and :func:`recorded_outcomes` of the rest."""
    if result.attempt_id in applied or (result.abandoned and result.ti_id in lost):
        return ReportStatus.APPLIED
    state, held = recorded.get(result.attempt_id, ("", True))
    if not held:
        return ReportStatus.NOT_HELD
    if not result.abandoned and state == recorded_state(result):
        return ReportStatus.DUPLICATE
    return ReportStatus.STALE
