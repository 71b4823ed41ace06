"""Names of the PostgreSQL NOTIFY channels and the format of their payloads.

Every notification is a hint, never an order: any role that can connect to the database may send
one on any channel (``pg_notify`` has no privilege of its own) and may LISTEN on any channel. So a
payload names nothing secret (no attempt id), every reader re-reads the database before it acts, a
forged payload costs at most a harmless re-read, and a malformed one is ignored (``decode_*`` raise
ValueError for anything but the documented form).
"""

from __future__ import annotations

from collections.abc import Iterable

#: A run needs evaluation (created, or one of its tasks finished). Payload: comma-separated items, each
#: a run id (evaluate the run in full) or ``<run id>/<task instance id>`` (that task instance changed:
#: the leader reads it again and plans what it affects; see ``decode_changes``).
RUNS = "schedd_runs"
#: As ``RUNS``, for changes that need no evaluation at once: a success whose quiet successor hand-off
#: was used, and the successor it queued (``schedd_core.handoffs``). The leader evaluates them a
#: little later, or with the run's next evaluation, whichever comes first.
RUNS_HANDED_OFF = "schedd_runs_handed_off"
#: Task instances were queued. Payload: the queue name.
QUEUED = "schedd_queued"
#: Attempts were marked lost; the leader should fail them over now. Payload: empty.
LOST = "schedd_lost"
#: A drain may have been requested for a worker. Payload: the worker id. The registry the worker is
#: connected to reads ``workers.drain_requested`` and tells the worker only if it is set.
WORKERS = "schedd_workers"
#: Events were written to the outbox. Payload: empty.
OUTBOX = "schedd_outbox"
#: A user stopped running attempts (cancel, clear, mark). Payload: comma-separated task instance ids
#: (``encode_ids``). Each registry reads which attempts of those task instances, held by workers
#: connected to it, are no longer current, and tells those workers to stop them.
CANCEL = "schedd_cancel"

#: A DAG's schedule must be looked at now (registered, its schedule changed, unpaused). Payload: the DAG id.
DAGS = "schedd_dags"
#: A backfill was created, resumed or cancelled. Payload: the backfill id.
BACKFILLS = "schedd_backfills"
#: Asset events were queued for DAGs scheduled on their assets. Payload: a DAG id.
ASSETS = "schedd_assets"

#: PostgreSQL refuses payloads of 8000 bytes or more.
MAX_PAYLOAD = 7900
#: Ids in payloads are PostgreSQL bigints: anything out of their range is malformed.
BIGINT_RANGE = range(-(2**63), 2**63)


def encode_ids(ids: Iterable[int]) -> list[str]:
    """Comma-separated payloads of ids, each under the size limit."""
    payloads: list[str] = []
    current: list[str] = []
    size = 0
    for i in ids:
        s = str(i)
        if size + len(s) + 1 > MAX_PAYLOAD and current:
            payloads.append(",".join(current))
            current, size = [], 0
        current.append(s)
        size += len(s) + 1
    if current:
        payloads.append(",".join(current))
    return payloads


def decode_ids(payload: str) -> list[int]:
    """The ids of a comma-separated payload. Raises ValueError for anything but bigints."""
    return [_id(p) for p in payload.split(",") if p]


def _id(text: str) -> int:
    digits = text.removeprefix("-")
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 19) or int(text) not in BIGINT_RANGE:
        raise ValueError(f"not an id: {text[:40]!r}")
    return int(text)


def decode_changes(payload: str) -> list[tuple[int, int | None]]:
    """The items of a RUNS payload: ``(run id, changed task instance id)``, or ``(run id, None)`` for
    a run to evaluate in full. Raises ValueError for anything else."""
    items: list[tuple[int, int | None]] = []
    for item in payload.split(","):
        if not item:
            continue
        run, sep, ti = item.partition("/")
        items.append((_id(run), _id(ti) if sep else None))
    return items
