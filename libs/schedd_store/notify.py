"""Listening to PostgreSQL NOTIFY channels.

A :class:`Listener` holds one dedicated asyncpg connection. Notifications are
delivered only after the notifying transaction commits, in commit order.
Notifications sent while the connection is down are lost, so after every
(re)connect the listener calls ``on_connect``: the owner must then re-read
whatever it might have missed. The listener reconnects with backoff until
stopped.

Any database role may send a notification on any channel, so a handler must take
its payload as a hint (see ``schedd_store.channels``). A handler that raises (a
malformed payload it did not expect) is logged, and the listener goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from schedd_core.backoff import Backoff
from schedd_core.database_url import asyncpg_dsn

log = logging.getLogger(__name__)

Handler = Callable[[str], None]


class Listener:
    def __init__(
        self,
        database_url: str,
        handlers: dict[str, Handler],
        on_connect: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._dsn = asyncpg_dsn(database_url)
        self._handlers = handlers
        self._on_connect = on_connect
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    async def start(self, *, wait: bool = True) -> None:
        """Connect (retrying with backoff) and, with ``wait``, return once listening."""
        self._task = asyncio.create_task(self._run(), name="pg-listener")
        if wait:
            await self.connected.wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        backoff = Backoff(0.1, 5.0, jitter=0.5)
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(
                    self._dsn, server_settings={"application_name": "schedd-listener"}
                )
                lost = asyncio.Event()
                conn.add_termination_listener(_setter(lost))
                for channel, handler in self._handlers.items():
                    await conn.add_listener(channel, _adapt(channel, handler))
                if self._on_connect is not None:
                    await self._on_connect()
                self.connected.set()
                backoff.reset()
                await lost.wait()
                log.warning("listener connection lost; reconnecting")
            except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
                log.warning("listener cannot connect: %s; retrying in %.1fs", exc, backoff.delay)
            finally:
                self.connected.clear()
                if conn is not None and not conn.is_closed():
                    await conn.close()
            await asyncio.sleep(backoff.take())


def _setter(event: asyncio.Event) -> Callable[[object], None]:
    def callback(_conn: object) -> None:
        event.set()

    return callback


def _adapt(channel: str, handler: Handler) -> Callable[[object, int, str, str], None]:
    def callback(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            handler(payload)
        except Exception as exc:
            log.warning("ignoring a %s notification its handler refused (%r): %s", channel, payload[:80], exc)

    return callback
