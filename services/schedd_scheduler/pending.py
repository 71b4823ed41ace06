"""The runs waiting for evaluation, fed by NOTIFY and drained by the scheduling loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from schedd_store.channels import decode_changes

log = logging.getLogger(__name__)

#: A run's pending entry: the task instances that changed since it was last planned, or None to
#: evaluate it in full (a new run, a manual change, a retry coming due, anything not reported).
Changes = set[int] | None


class PendingRuns:
    """Runs to evaluate, coalesced: many notifications about one run cost one evaluation.

    A registry reports the task instances a result changed (``run/ti`` items), so the leader reads
    only those again; every other notifier asks for a full evaluation, which wins over changes.
    ``full_scan`` is requested when notifications may have been missed (a new term, a reconnected
    listener); the loop then evaluates every unfinished run in full.
    """

    def __init__(self) -> None:
        self._runs: dict[int, Changes] = {}
        self._full_scan = True
        self._wake = asyncio.Event()
        self._wake.set()

    def add_payload(self, payload: str) -> None:
        try:
            items = decode_changes(payload)
        except ValueError:
            log.warning("ignoring a malformed run notification: %r", payload[:100])
            return
        for run_pk, ti_id in items:
            if ti_id is None:
                self._runs[run_pk] = None
            elif run_pk not in self._runs:
                self._runs[run_pk] = {ti_id}
            else:
                changes = self._runs[run_pk]
                if changes is not None:
                    changes.add(ti_id)
        if items:
            self._wake.set()

    def add(self, ids: Iterable[int]) -> None:
        """Evaluate these runs in full."""
        added = False
        for run_pk in ids:
            self._runs[run_pk] = None
            added = True
        if added:
            self._wake.set()

    def request_full_scan(self) -> None:
        self._full_scan = True
        self._wake.set()

    async def wait(self) -> None:
        await self._wake.wait()

    def take(self, limit: int) -> tuple[bool, dict[int, Changes]]:
        """``(full_scan, runs)``: whether a full scan is due, and up to ``limit`` runs (removed) with
        their changes."""
        full, self._full_scan = self._full_scan, False
        if len(self._runs) <= limit:
            taken, self._runs = self._runs, {}
        else:
            taken = {}
            for run_pk in list(self._runs)[:limit]:
                taken[run_pk] = self._runs.pop(run_pk)
        if not self._runs and not self._full_scan:
            self._wake.clear()
        return full, taken
