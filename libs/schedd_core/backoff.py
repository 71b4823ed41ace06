"""Exponential backoff for the retry loops of the services (reconnecting, re-reading, re-writing).

:func:`backoff_delay` is the schedule, pure: after ``failures`` failures in a row the wait is
``first * factor ** (failures - 1)``, at most ``cap``. :class:`Backoff` keeps the count of one loop
(``take`` after a failure, ``reset`` after a success) and may spread its waits by a jitter drawn from
an injected source. :func:`retry` runs an operation until it succeeds, sleeping through an injected
``sleep``, so tests run it with no real time passing.

Not guaranteed: anything about wall-clock time (a sleep may last longer than asked), and no limit on
the number of tries: a loop that must give up says when.

Task retries (a task's ``retry_delay``) follow the DAG's own policy, in ``schedd_core.retry``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: The exponent is bounded so that a loop failing for days cannot overflow; the cap applies anyway.
_MAX_EXPONENT = 60


def backoff_delay(failures: int, *, first: float, cap: float, factor: float = 2.0) -> float:
    """Seconds to wait after ``failures`` (1 or more) failures in a row."""
    if failures < 1:
        raise ValueError(f"failures must be at least 1, got {failures}")
    return min(first * factor ** min(failures - 1, _MAX_EXPONENT), cap)


class Backoff:
    """The waits of one retry loop: ``first``, then ``factor`` times the one before, at most ``cap``.

    With ``jitter`` j > 0 each wait is scaled by a factor in ``[1 - j, 1 + j)`` drawn from ``draw``
    (a source of floats in [0, 1)), so many processes that failed together do not retry together;
    :attr:`delay` (what a log line names) is the wait before that scaling.
    """

    def __init__(
        self,
        first: float,
        cap: float,
        *,
        factor: float = 2.0,
        jitter: float = 0.0,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {jitter}")
        self._first = first
        self._cap = cap
        self._factor = factor
        self._jitter = jitter
        self._draw = draw
        self._failures = 0

    @property
    def delay(self) -> float:
        """The next wait (before jitter)."""
        return backoff_delay(self._failures + 1, first=self._first, cap=self._cap, factor=self._factor)

    def take(self) -> float:
        """After a failure: the wait to sleep now (jitter applied); the next one is longer."""
        wait = self.delay
        self._failures += 1
        if self._jitter:
            wait *= 1.0 - self._jitter + 2.0 * self._jitter * self._draw()
        return wait

    def reset(self) -> None:
        """After a success: the next wait is ``first`` again."""
        self._failures = 0


async def retry(
    operation: Callable[[], Awaitable[T]],
    backoff: Backoff,
    *,
    retry_on: Callable[[Exception], bool] = lambda _exc: True,
    on_failure: Callable[[Exception, float], None] = lambda _exc, _delay: None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """``await operation()`` until it returns, sleeping ``backoff``'s waits between tries.

    An exception ``retry_on`` refuses is raised at once; every other one is passed to ``on_failure``
    (with the wait to come, before jitter) and the operation is tried again after ``sleep``.
    Cancelling the caller cancels the try or the sleep under way.
    """
    while True:
        try:
            return await operation()
        except Exception as exc:
            if not retry_on(exc):
                raise
            on_failure(exc, backoff.delay)
            await sleep(backoff.take())
