"""Running a transactional Python task: its database work and its own success in one transaction.

The task gets an open asyncpg ``connection`` inside a transaction on the metadata database,
connected as the worker's *task role* (a member of ``schedd_tasks``, with no right on schedd's own
tables; the user grants it what the task needs on their schemas). When it returns, the same
transaction calls ``schedd_commit_attempt`` with the attempt's *commit secret* (made by the claim,
carried by this attempt's assignment and handed to this process alone; the database keeps only its
SHA-256), which marks the attempt succeeded only while that exact attempt (task instance, try
number, attempt id) is running, and writes its success callback event to the outbox. Without the
secret no task can commit another task's attempt (the function refuses with
``insufficient_privilege``); the secret is no proof against code running in this very process,
which is the attempt's own. If the attempt was superseded meanwhile (failed over, cleared, cancelled),
nothing matches and everything the task wrote is rolled back, so from the scheduler's view the
task takes effect exactly once. If the task raises, everything is rolled back too and the attempt
fails (and retries) as usual. Runs in the warm Python child; imported only when such a task runs.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]

#: Marks the attempt succeeded inside the task's own transaction, through the one database function the
#: task's role may execute (``schedd_commit_attempt``, defined by the store's migration 0019): refused
#: (``insufficient_privilege``) unless the secret is that attempt's commit secret; false when that
#: exact attempt (task instance, try number, attempt id) is no longer running, and the caller must roll
#: back. Positional parameters: ti id, attempt id, try number, commit secret, started at, result JSON.
COMMIT_TRANSACTIONAL_ATTEMPT = "SELECT schedd_commit_attempt($1, $2::uuid, $3, $4, $5, $6::jsonb)"


class StaleAttemptRolledBack(Exception):
    """The attempt was no longer current when the task finished; its writes were rolled back."""


async def run_in_transaction(
    func: Callable[..., Any], kwargs: dict[str, Any], wants_connection: bool, transaction: dict[str, Any]
) -> Any:
    started = datetime.fromisoformat(transaction["started_at"])
    conn = await asyncpg.connect(transaction["dsn"])
    try:
        async with conn.transaction():
            if wants_connection:
                kwargs = {**kwargs, "connection": conn}
            result = func(**kwargs)
            if inspect.isawaitable(result):
                result = await result
            encoded = None if result is None else json.dumps(result)
            committed = await conn.fetchval(
                COMMIT_TRANSACTIONAL_ATTEMPT,
                int(transaction["ti_id"]),
                transaction["attempt_id"],
                int(transaction["try_number"]),
                str(transaction["secret"]),
                started,
                encoded,
            )
            if not committed:
                raise StaleAttemptRolledBack(
                    "the attempt is no longer current; everything the task wrote was rolled back"
                )
        return result
    finally:
        await conn.close()
