"""Reading the captured output of attempts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from schedd_core.errors import NotFound, quote
from schedd_core.mapping import split_key
from schedd_core.states import AttemptState, TaskState
from schedd_store import statements as sql
from schedd_store.database import Engine
from schedd_store.instance_lookup import NotStartedYet, missing_instance
from schedd_store.rows import Row

#: Stored pieces of output read at a time.
PAGE_ROWS = 1000

#: Task instance states that last until it is cleared: no further try starts from them.
FINAL_STATES = frozenset(
    {TaskState.SUCCESS, TaskState.FAILED, TaskState.SKIPPED, TaskState.UPSTREAM_FAILED, TaskState.REMOVED}
)


@dataclass(frozen=True)
class LogSlice:
    data: str
    next_offset: int
    try_number: int
    complete: bool
    #: The task instance as it was when this was read (in the same snapshot as ``complete``).
    state: TaskState
    #: Its latest try that has an attempt.
    latest_try: int
    #: How many tries it may have (retries + 1, plus one per attempt lost with its worker).
    max_tries: int


async def read_logs(
    engine: Engine,
    *,
    dag_id: str,
    run_id: str,
    task_key: str,
    try_number: int,
    offset: int,
    max_bytes: int,
) -> LogSlice:
    """Output of one attempt of the task instance ``task_key`` names (a task id, or
    ``task_id[map_index]``) from byte ``offset`` (``try_number`` 0: its latest try that has an
    attempt, so a retry that is queued but not started yet does not hide the try before it): all of
    it up to ``max_bytes``, however many pieces it was stored in.

    ``complete`` is true once the attempt has ended; output can still arrive for a moment after
    an attempt ended, so followers should read once more after seeing it. Raises
    :class:`NotStartedYet` (a NotFound) while the task instance does not exist or has not run yet,
    or while the try asked for is the one after its latest and the task instance is not in a
    final state (it may still run it); NotFound when the key names no task instance for good, or
    the try does not exist and will not.
    """
    task_id, map_index = split_key(task_key)
    params = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    async with engine.connect() as conn, conn.begin(isolation="repeatable_read"):
        ti = (await conn.execute(sql.FIND_TASK_INSTANCE, params)).first()
        if ti is None:
            raise await missing_instance(conn, dag_id, run_id, task_key)
        latest = ti.attempted_try or 0
        number = try_number or latest
        if number == 0 or number > latest:
            _no_such_try(task_key, run_id, number, latest, TaskState(ti.state))
        out = bytearray()
        position = offset
        while len(out) < max_bytes:  # a page of stored pieces at a time
            read = {"ti_id": ti.id, "try_number": number, "offset": position, "limit": PAGE_ROWS}
            rows = (await conn.execute(sql.READ_LOGS, read)).all()
            position = _append(out, rows, position, max_bytes)
            if len(rows) < PAGE_ROWS:
                break
        attempt_state = (
            await conn.execute(sql.ATTEMPT_STATE, {"ti_id": ti.id, "try_number": number})
        ).scalar()
    return LogSlice(
        data=out.decode(errors="replace"),
        next_offset=position,
        try_number=number,
        complete=attempt_state is not None and attempt_state != AttemptState.RUNNING,
        state=TaskState(ti.state),
        latest_try=latest,
        max_tries=ti.max_tries,
    )


def _no_such_try(task_key: str, run_id: str, number: int, latest: int, state: TaskState) -> NoReturn:
    where = f"task {quote(task_key)} of run {quote(run_id)}"
    if latest == 0:
        raise NotStartedYet(f"{where} has not run yet")
    if number == latest + 1 and state not in FINAL_STATES:
        raise NotStartedYet(f"{where} has not started try {number} yet (it is {state.value})")
    raise NotFound(f"{where} has no try {number} (latest: {latest})")


def _append(out: bytearray, rows: Sequence[Row], position: int, max_bytes: int) -> int:
    """Add the stored pieces ``rows`` from byte ``position`` to ``out``, up to ``max_bytes`` in all;
    the position after them."""
    for row in rows:
        data = row.data.encode()
        start = row.byte_offset
        if start + len(data) <= position:
            continue  # already read
        # A chunk produced while the worker was disconnected is lost; skip the gap.
        position = max(position, start)
        out += data[position - start :]
        position = start + len(data)
        if len(out) >= max_bytes:
            position -= len(out) - max_bytes
            del out[max_bytes:]
            break
    return position
