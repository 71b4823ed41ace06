"""The audit log of refused calls without a known caller, counted per window instead of written one
row per call.

A call refused before its caller is known (UNAUTHENTICATED: no token, a malformed, unknown, forged,
revoked or expired one; UNAVAILABLE: the token could not be checked) costs an attacker nothing, so
writing a row for each would let anyone fill the database. Such refusals are grouped by (peer host,
method, status code) in windows of ``window_seconds``: the first of a group in a window is written at
once, as before (so a new kind of refusal is seen at once and with its details); the others of that
window only increase an in-memory count, written as one row whose ``count`` is how many calls it
stands for, once the window has ended. At most ``max_groups`` groups are tracked at once; the calls of
any further group are counted under the peer ``*`` (still one row per method and code).

Refusals of a known token (PERMISSION_DENIED) are not handled here: each is written as its own row,
since it names a principal that can be revoked.

Not guaranteed: counts still in memory when the process dies without :meth:`RefusedCalls.close`
(a kill) are lost; at most one window of them per group.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from schedd_auth.audit import AuditRecord
from schedd_core.errors import InvalidArgument

log = logging.getLogger(__name__)

WINDOW_ENV = "SCHEDD_AUDIT_REFUSAL_WINDOW_SECONDS"
DEFAULT_WINDOW_SECONDS = 60.0
DEFAULT_MAX_GROUPS = 10_000
#: The peer that calls of groups beyond ``max_groups`` are counted under.
ANY_PEER = "*"

Write = Callable[[AuditRecord], Awaitable[None]]


def window_from_env(env: Mapping[str, str]) -> float:
    """``SCHEDD_AUDIT_REFUSAL_WINDOW_SECONDS`` (60 when unset); InvalidArgument unless positive."""
    raw = env.get(WINDOW_ENV, "").strip()
    if not raw:
        return DEFAULT_WINDOW_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        raise InvalidArgument(WINDOW_ENV, f"must be a number of seconds, not {raw!r}") from None
    if not seconds > 0:
        raise InvalidArgument(WINDOW_ENV, f"must be more than 0, not {raw!r}")
    return seconds


def peer_host(peer: str) -> str:
    """``ipv4:10.0.0.7`` for ``ipv4:10.0.0.7:51234``: the peer without its port (which changes with
    every connection)."""
    kind, sep, rest = peer.partition(":")
    if not sep or kind not in ("ipv4", "ipv6"):
        return peer
    return f"{kind}:{rest.rpartition(':')[0]}"


@dataclass
class _Window:
    ends: float
    first: AuditRecord
    more: int = 0


class RefusedCalls:
    """See the module docstring. ``write`` stores one row; ``clock`` is monotonic seconds."""

    def __init__(
        self,
        write: Write,
        *,
        window_seconds: float = DEFAULT_WINDOW_SECONDS,
        max_groups: int = DEFAULT_MAX_GROUPS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._window = window_seconds
        self._max_groups = max_groups
        self._clock = clock
        self._windows: dict[tuple[str, str, str], _Window] = {}
        self._flusher: asyncio.Task[None] | None = None

    async def refused(self, entry: AuditRecord) -> None:
        """Write ``entry`` if it is the first of its group in the current window, else count it."""
        now = self._clock()
        key = (peer_host(entry.peer), entry.method, entry.code)
        if key not in self._windows and len(self._windows) >= self._max_groups:
            key = (ANY_PEER, entry.method, entry.code)
        window = self._windows.get(key)
        if window is not None and now < window.ends:
            window.more += 1
            self._start_flusher()
            return
        if window is not None:
            await self._write_count(key, self._windows.pop(key))
        self._windows[key] = _Window(ends=now + self._window, first=entry)
        self._start_flusher()
        await self._write(entry)

    async def flush(self, *, everything: bool = False) -> None:
        """Write the counts of the windows that ended (of all, with ``everything``) and forget them."""
        now = self._clock()
        ended = [k for k, w in self._windows.items() if everything or now >= w.ends]
        for key in ended:
            await self._write_count(key, self._windows.pop(key))

    async def close(self) -> None:
        """Write every count still held and stop the background flush."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        await self.flush(everything=True)

    def _start_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_until_idle())

    async def _flush_until_idle(self) -> None:
        while self._windows:
            soonest = min(w.ends for w in self._windows.values())
            await asyncio.sleep(max(0.0, soonest - self._clock()))
            await self.flush()

    async def _write_count(self, key: tuple[str, str, str], window: _Window) -> None:
        if not window.more:
            return
        host = key[0]
        seconds = f"{self._window:g}"
        entry = dataclasses.replace(
            window.first,
            peer=host,
            count=window.more,
            resource="",
            request_id="",
            detail=(
                f"{window.more} more refused calls like the first of this {seconds}s window "
                f"from {host}: {window.first.detail}"
            ),
        )
        try:
            await self._write(entry)
        except Exception as exc:
            log.error("cannot write the count of %d refused calls of %s: %s", window.more, key[1], exc)
