"""Queues a claim found empty, so that credits granted meanwhile cost no claim.

A worker grants a credit each time a task ends. Without this, each credit would cost a claim
statement, and in a chain (whose next task is handed off in the result's own transaction) every one
of those claims finds nothing. A claim that returns fewer task instances than it had slots found
each of its queues empty (or held by other transactions: ``SKIP LOCKED``); that finding is trusted
for :data:`EMPTY_TRUSTED_FOR` seconds, or until a ``schedd_queued`` notification names the queue.

What it does not lose: work queued after the finding is announced by its notification (the leader's
queueing statements notify every queue they fill), and a notification that arrives while a claim
runs voids that claim's finding (its snapshot may predate the work). A reconnected listener voids
every finding. What it may delay, by at most :data:`EMPTY_TRUSTED_FOR`: a task instance the claim
skipped because another transaction held it, when credits are granted meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable

from schedd_core.clock import Clock

#: Seconds a claim's finding that its queues are empty is trusted.
EMPTY_TRUSTED_FOR = 1.0


class EmptyQueues:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        #: Queue -> monotonic time a claim found it empty.
        self._found: dict[str, float] = {}
        #: Counts notifications: one during a claim voids its finding.
        self._told = 0

    def told(self, queue: str) -> None:
        """A notification: ``queue`` got work ("" when any queue may have: a reconnect)."""
        self._told += 1
        if queue:
            self._found.pop(queue, None)
        else:
            self._found.clear()

    def before_claim(self) -> int:
        """Call before claiming; pass what it returns to :meth:`found_empty`."""
        return self._told

    def found_empty(self, queues: Iterable[str], before: int) -> None:
        """A claim begun when :meth:`before_claim` returned ``before`` found ``queues`` empty."""
        if before == self._told:
            now = self._clock.monotonic()
            self._found.update((q, now) for q in queues)

    def empty_until(self, queues: Iterable[str]) -> float | None:
        """Until when (monotonic) every one of ``queues`` is known to be empty, or None when one of
        them may have work."""
        found = [self._found.get(q) for q in queues]
        if not found or any(t is None for t in found):
            return None
        until = min(t for t in found if t is not None) + EMPTY_TRUSTED_FOR
        return until if until > self._clock.monotonic() else None
