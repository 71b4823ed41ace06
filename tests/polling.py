"""Bounded waits for a condition, the one way tests wait for something to happen.

``wait_until`` (threads, subprocesses, other services) and ``wait_until_async`` (inside an event loop)
call ``probe`` until it returns a truthy value and return that value. They fail with an
``AssertionError`` naming ``what`` was awaited once ``timeout`` seconds have passed without it. An
exception the probe raises fails the wait at once, unless its type is in ``retry_on`` (for a thing
that may not be up yet): then the wait goes on and the last such error is named if it times out.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: How long to sleep between two probes when the caller does not say.
INTERVAL = 0.05


def _timed_out(what: str, timeout: float, last_error: BaseException | None) -> AssertionError:
    cause = f" (last error: {last_error!r})" if last_error is not None else ""
    return AssertionError(f"timed out after {timeout:g}s waiting for {what}{cause}")


def wait_until(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    *,
    interval: float = INTERVAL,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """The first truthy value of ``probe()``, polled every ``interval`` seconds for at most ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except retry_on as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last_error)
        time.sleep(interval)


@overload
async def wait_until_async(
    what: str,
    probe: Callable[[], Awaitable[T | None]],
    timeout: float,
    *,
    interval: float = INTERVAL,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T: ...


@overload
async def wait_until_async(
    what: str,
    probe: Callable[[], T],
    timeout: float,
    *,
    interval: float = INTERVAL,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T: ...


async def wait_until_async(
    what: str,
    probe: Callable[[], Any],
    timeout: float,
    *,
    interval: float = INTERVAL,
    retry_on: tuple[type[BaseException], ...] = (),
) -> Any:
    """:func:`wait_until` for an event loop: ``probe`` may be a coroutine function; the loop runs
    between probes."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
        except retry_on as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last_error)
        await asyncio.sleep(interval)
