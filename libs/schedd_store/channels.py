"""Names of the PostgreSQL NOTIFY channels and the format of their payloads."""

from __future__ import annotations

from collections.abc import Iterable

#: A run needs evaluation (created, or one of its tasks finished). Payload: comma-separated items, each
#: a run id (evaluate the run in full) or ``<run id>/<task instance id>`` (that task instance changed:
#: the leader reads it again and plans what it affects; see ``decode_changes``).
RUNS = "schedd_runs"
#: Task instances were queued. Payload: the queue name.
QUEUED = "schedd_queued"
#: Attempts were marked lost; the leader should fail them over now. Payload: empty.
LOST = "schedd_lost"
#: A drain was requested for a worker. Payload: the worker id.
WORKERS = "schedd_workers"
#: Events were written to the outbox. Payload: empty.
OUTBOX = "schedd_outbox"
#: Attempts a user stopped (cancel, clear, mark). Payload: lines of ``worker_id ti_id attempt_id``.
CANCEL = "schedd_cancel"

#: A DAG's schedule must be looked at now (registered, its schedule changed, unpaused). Payload: the DAG id.
DAGS = "schedd_dags"
#: A backfill was created, resumed or cancelled. Payload: the backfill id.
BACKFILLS = "schedd_backfills"

#: PostgreSQL refuses payloads of 8000 bytes or more.
MAX_PAYLOAD = 7900


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
    return [int(p) for p in payload.split(",") if p]


def decode_changes(payload: str) -> list[tuple[int, int | None]]:
    """The items of a RUNS payload: ``(run id, changed task instance id)``, or ``(run id, None)`` for
    a run to evaluate in full. Raises ValueError for anything else."""
    items: list[tuple[int, int | None]] = []
    for item in payload.split(","):
        if not item:
            continue
        run, sep, ti = item.partition("/")
        items.append((int(run), int(ti) if sep else None))
    return items
