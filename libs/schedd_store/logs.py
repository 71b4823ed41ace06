"""Reading the captured output of attempts."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_core.errors import NotFound, quote
from schedd_core.mapping import split_key
from schedd_store import statements as sql
from schedd_store.instance_lookup import NotStartedYet, missing_instance


@dataclass(frozen=True)
class LogSlice:
    data: str
    next_offset: int
    try_number: int
    complete: bool


async def read_logs(
    engine: AsyncEngine,
    *,
    dag_id: str,
    run_id: str,
    task_key: str,
    try_number: int,
    offset: int,
    max_bytes: int,
) -> LogSlice:
    """Output of one attempt of the task instance ``task_key`` names (a task id, or
    ``task_id[map_index]``) from byte ``offset`` (``try_number`` 0: the latest attempt).

    ``complete`` is true once the attempt has ended; output can still arrive for a moment after
    an attempt ended, so followers should read once more after seeing it. Raises
    :class:`NotStartedYet` (a NotFound) while the task instance does not exist or has not run yet,
    NotFound when the key names no task instance for good, or the try does not exist.
    """
    task_id, map_index = split_key(task_key)
    params = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    async with engine.connect() as conn:
        ti = (await conn.execute(sql.FIND_TASK_INSTANCE, params)).first()
        if ti is None:
            raise await missing_instance(conn, dag_id, run_id, task_key)
        number = try_number or ti.try_number
        if ti.try_number == 0:
            raise NotStartedYet(f"task {quote(task_key)} of run {quote(run_id)} has not run yet")
        if number > ti.try_number:
            raise NotFound(
                f"task {quote(task_key)} of run {quote(run_id)} has no try {number} (latest: {ti.try_number})"
            )
        rows = (
            await conn.execute(sql.READ_LOGS, {"ti_id": ti.id, "try_number": number, "offset": offset})
        ).all()
        attempt_state = (
            await conn.execute(sql.ATTEMPT_STATE, {"ti_id": ti.id, "try_number": number})
        ).scalar()
    out = bytearray()
    position = offset
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
    complete = attempt_state is not None and attempt_state != "running"
    return LogSlice(
        data=out.decode(errors="replace"), next_offset=position, try_number=number, complete=complete
    )
