"""The set of runs waiting for evaluation, fed by NOTIFY and drained by the scheduling loop."""

from __future__ import annotations

import asyncio

from schedd_store.channels import decode_ids


class PendingRuns:
    """Run ids to evaluate, coalesced: many notifications about one run cost one evaluation.

    ``full_scan`` is requested when notifications may have been missed (a new term,
    a reconnected listener); the loop then evaluates every unfinished run.
    """

    def __init__(self) -> None:
        self._ids: set[int] = set()
        self._full_scan = True
        self._wake = asyncio.Event()
        self._wake.set()

    def add_payload(self, payload: str) -> None:
        self.add(decode_ids(payload))

    def add(self, ids: list[int] | set[int]) -> None:
        if ids:
            self._ids.update(ids)
            self._wake.set()

    def request_full_scan(self) -> None:
        self._full_scan = True
        self._wake.set()

    async def wait(self) -> None:
        await self._wake.wait()

    def take(self, limit: int) -> tuple[bool, list[int]]:
        """``(full_scan, ids)``: whether a full scan is due, and up to ``limit`` ids (removed)."""
        full, self._full_scan = self._full_scan, False
        if len(self._ids) <= limit:
            ids, self._ids = list(self._ids), set()
        else:
            ids = [self._ids.pop() for _ in range(limit)]
        if not self._ids and not self._full_scan:
            self._wake.clear()
        return full, ids
