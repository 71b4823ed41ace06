"""Merging the messages of a stream that are ready together.

Every message on a worker's stream costs a write on one side and a read, a decode and a check on
the other, whatever its size. When several results (or acks) wait in a stream's outgoing queue
at once (a fan-out's tasks end together; a batch of results is applied in one transaction), they
go as one message: :func:`drain` takes what the queue holds now and merges each run of adjacent
messages of one kind into one, keeping every message's order. A lone message goes as it is.

Guaranteed: nothing is dropped or reordered; a merged message is at most ``max_bytes`` (a
message larger than that alone goes alone). Not guaranteed: that messages apart in time are merged
(nothing waits for more: a lone message is sent at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from google.protobuf.message import Message

#: Largest merged message: far below any receive limit, large enough for hundreds of results.
MAX_BATCH_BYTES = 64 * 1024

M = TypeVar("M", bound=Message)
P = TypeVar("P", bound=Message)


def drain(
    first: M,
    queue: asyncio.Queue[M],
    field: str,
    merge: Callable[[Sequence[P]], M],
    *,
    max_bytes: int = MAX_BATCH_BYTES,
) -> list[M]:
    """``first`` and every message ``queue`` holds now, in order, with each run of adjacent messages
    whose oneof ``message`` is ``field`` merged by ``merge`` (given their ``field`` parts)."""
    out: list[M] = []
    run: list[M] = []
    size = 0

    def flush() -> None:
        nonlocal size
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(merge([getattr(m, field) for m in run]))
        run.clear()
        size = 0

    message: M | None = first
    while message is not None:
        if message.WhichOneof("message") == field:
            item = message.ByteSize()
            if run and size + item > max_bytes:
                flush()
            run.append(message)
            size += item
        else:
            flush()
            out.append(message)
        message = None if queue.empty() else queue.get_nowait()
    flush()
    return out
