"""Group concurrent requests into one database transaction.

Whatever arrives while a batch is being written goes into the next batch, so
under load the number of transactions stays small and no request waits for a
timer: a lone request is written at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """``apply`` takes a batch and returns one answer per item, in order."""

    def __init__(
        self, name: str, apply: Callable[[Sequence[T]], Awaitable[Sequence[R]]], *, max_batch: int = 1000
    ) -> None:
        self._name = name
        self._apply = apply
        self._max_batch = max_batch
        self._queue: asyncio.Queue[tuple[T, asyncio.Future[R]]] = asyncio.Queue()

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((item, future))
        return await future

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                answers = await self._apply([item for item, _ in batch])
            except Exception as exc:
                log.exception("%s: writing a batch of %d failed", self._name, len(batch))
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), answer in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answer)
