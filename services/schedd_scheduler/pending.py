"""The runs waiting for evaluation, fed by NOTIFY and drained by the scheduling loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from schedd_store.channels import decode_changes

log = logging.getLogger(__name__)

#: How long a change that needs no evaluation at once (``channels.RUNS_HANDED_OFF``) may wait for
#: one: a chain whose links are handed off costs the leader a pass per this much time, not per link.
HANDED_OFF_DELAY = 0.25

#: A run's pending entry: the task instances that changed since it was last planned, or None to
#: evaluate it in full (a new run, a manual change, a retry coming due, anything not reported).
Changes = set[int] | None


class PendingRuns:
    """Runs to evaluate, coalesced: many notifications about one run cost one evaluation.

    A registry reports the task instances a result changed (``run/ti`` items), so the leader reads
    only those again; every other notifier asks for a full evaluation, which wins over changes.
    ``full_scan`` is requested when notifications may have been missed (a new term, a reconnected
    listener); the loop then evaluates every unfinished run in full.

    Changes that need no evaluation at once (:meth:`add_handed_off_payload`) wait up to
    :data:`HANDED_OFF_DELAY`, or until their run is taken for another reason, whichever is first;
    they are never dropped.
    """

    def __init__(self, *, handed_off_delay: float = HANDED_OFF_DELAY) -> None:
        self._runs: dict[int, Changes] = {}
        self._later: dict[int, Changes] = {}
        self._later_timer: asyncio.TimerHandle | None = None
        self._handed_off_delay = handed_off_delay
        self._full_scan = True
        self._wake = asyncio.Event()
        self._wake.set()

    def add_payload(self, payload: str) -> None:
        items = _decoded(payload)
        for run_pk, ti_id in items:
            _merge(self._runs, run_pk, None if ti_id is None else {ti_id})
        if items:
            self._wake.set()

    def add_handed_off_payload(self, payload: str) -> None:
        """Changes the leader may look at a little later (``channels.RUNS_HANDED_OFF``)."""
        for run_pk, ti_id in _decoded(payload):
            changes = None if ti_id is None else {ti_id}
            _merge(self._runs if run_pk in self._runs else self._later, run_pk, changes)
        if self._later and self._later_timer is None:
            self._later_timer = asyncio.get_running_loop().call_later(
                self._handed_off_delay, self._promote_later
            )

    def _promote_later(self) -> None:
        self._later_timer = None
        for run_pk, changes in self._later.items():
            _merge(self._runs, run_pk, changes)
        if self._later:
            self._later = {}
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
        for run_pk in taken.keys() & self._later.keys():
            _merge(taken, run_pk, self._later.pop(run_pk))
        if not self._runs and not self._full_scan:
            self._wake.clear()
        return full, taken


def _decoded(payload: str) -> list[tuple[int, int | None]]:
    try:
        return decode_changes(payload)
    except ValueError:
        log.warning("ignoring a malformed run notification: %r", payload[:100])
        return []


def _merge(runs: dict[int, Changes], run_pk: int, changes: Changes) -> None:
    """Add ``changes`` to ``run_pk``'s entry in ``runs`` (None, a full evaluation, wins)."""
    if run_pk not in runs:
        runs[run_pk] = None if changes is None else set(changes)
        return
    known = runs[run_pk]
    if changes is None:
        runs[run_pk] = None
    elif known is not None:
        known.update(changes)
