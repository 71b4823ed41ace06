"""Applying attempt results in batches: everything that arrived while the last batch was being
written goes into the next one transaction."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_store.dispatch import AttemptResult, ReportStatus, apply_results

log = logging.getLogger(__name__)


class ResultBatcher:
    def __init__(self, engine: AsyncEngine, *, max_batch: int = 1000) -> None:
        self._engine = engine
        self._max_batch = max_batch
        self._queue: asyncio.Queue[tuple[AttemptResult, asyncio.Future[ReportStatus]]] = asyncio.Queue()

    async def submit(self, result: AttemptResult) -> ReportStatus:
        future: asyncio.Future[ReportStatus] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((result, future))
        return await future

    async def run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                statuses = await apply_results(self._engine, [r for r, _ in batch])
            except Exception as exc:
                log.exception("applying %d results failed", len(batch))
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), status in zip(batch, statuses, strict=True):
                if not future.done():
                    future.set_result(status)
