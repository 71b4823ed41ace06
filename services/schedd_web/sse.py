"""Server-sent event streams (``text/event-stream``) for the live pages.

Each stream lives at most :data:`MAX_STREAM_SECONDS`; the browser's EventSource then reconnects by
itself, which checks the session (and, through the api, the token) again. A comment line goes out
after :data:`KEEPALIVE_SECONDS` without an event so that proxies keep the connection open, and so
that a stream whose browser left is noticed (its next write fails) and closed within that time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TypeVar

from aiohttp import web

from schedd_web.base import METRICS

MAX_STREAM_SECONDS = 300.0
KEEPALIVE_SECONDS = 15.0

T = TypeVar("T")


class EventStream:
    """An open event stream; use as ``async with EventStream(request) as stream``."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )

    async def __aenter__(self) -> EventStream:
        await self._response.prepare(self._request)
        self._request.app[METRICS].streams.inc()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *rest: object) -> bool:
        """Closes the stream's count; a browser that went away (a write failed) ends it quietly."""
        self._request.app[METRICS].streams.dec()
        return kind is not None and issubclass(kind, ConnectionResetError)

    @property
    def response(self) -> web.StreamResponse:
        return self._response

    async def send(self, event: str, data: str, *, event_id: str = "") -> None:
        """One event; ``data`` may span lines (each becomes a ``data:`` line)."""
        lines = [f"event: {event}"]
        if event_id:
            lines.append(f"id: {event_id}")
        lines += [f"data: {line}" for line in (data.splitlines() or [""])]
        await self._response.write(("\n".join(lines) + "\n\n").encode())

    async def keepalive(self) -> None:
        await self._response.write(b": keepalive\n\n")


async def with_pauses(source: AsyncGenerator[T, None], interval: float) -> AsyncGenerator[T | None, None]:
    """The items of ``source``, and None whenever ``interval`` seconds pass without one (a moment to
    send a keepalive, and so to notice a browser that left). Leaving the loop closes ``source``."""
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield None
                continue
            finished, pending = pending, None
            try:
                item = finished.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        await source.aclose()
