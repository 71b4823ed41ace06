"""Live runs: one upstream ``WatchRun`` per run, shared by every viewer of it in this process.

A viewer subscribes with its own token: :meth:`RunHub.subscribe` first reads the run with
``GetRun`` under that token, so a viewer whose token may not read it gets the api's refusal and
nothing else. The shared stream then runs under the token of a current subscriber (the first; when
its call fails, the next one's), so it stops when nobody watches the run any more. Each subscriber
holds only the newest snapshot: a slow page skips the states it missed and gets the latest, and
never makes the stream wait.

Guaranteed: at most one ``WatchRun`` per run name and process at a time, and none once the run's
last subscriber left. A watch the api keeps failing (for a few seconds per subscriber) ends without
``final``: pages then reconnect and subscribe again, which reads the run anew. Not guaranteed:
every intermediate state reaches every page (only the latest does). A subscriber's own right to
read is checked when it subscribes; pages reconnect at bounded intervals
(:data:`schedd_web.sse.MAX_STREAM_SECONDS`), so a revoked token stops seeing updates within that
interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web.api import Api, ApiError
from schedd_web.metrics import WebMetrics

log = logging.getLogger("schedd.web.live")

FINAL_RUN_STATES = frozenset({pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED})
#: Seconds between attempts to reopen a stream the api ended with an error.
RETRY_SECONDS = 1.0


@dataclass(eq=False)
class Subscription:
    token: str
    latest: pb.DagRun | None = None
    #: set when ``latest`` changed or the watch ended
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: no more snapshots come: the run reached a final state (``final``) or the api kept failing
    ended: bool = False
    final: bool = False

    async def next(self, timeout: float) -> pb.DagRun | None:
        """The newest snapshot not yet taken, or None after ``timeout`` seconds without one."""
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except TimeoutError:
            return None
        self.changed.clear()
        run, self.latest = self.latest, None
        return run


@dataclass(eq=False)
class _Watch:
    name: str
    subscribers: list[Subscription] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class RunHub:
    def __init__(self, api: Api, metrics: WebMetrics) -> None:
        self._api = api
        self._metrics = metrics
        self._watches: dict[str, _Watch] = {}

    @property
    def watching(self) -> int:
        """How many upstream watches are open."""
        return len(self._watches)

    @contextlib.asynccontextmanager
    async def subscribe(self, name: str, token: str) -> AsyncIterator[Subscription]:
        """Subscribe to the run ``name``: the subscription starts with the run as ``token`` reads it
        (ApiError when it may not), then gets each change; leaving the block unsubscribes."""
        run = await self._api.call(self._api.runs.GetRun, api_pb2.GetRunRequest(name=name), token)
        sub = Subscription(token, latest=run)
        sub.changed.set()
        if run.state in FINAL_RUN_STATES:
            sub.ended = sub.final = True
            yield sub
            return
        watch = self._watches.get(name)
        if watch is None:
            watch = self._watches[name] = _Watch(name)
            watch.task = asyncio.create_task(self._pump(watch), name=f"watch {name}")
            self._metrics.upstream_watches.set(len(self._watches))
        watch.subscribers.append(sub)
        try:
            yield sub
        finally:
            watch.subscribers.remove(sub)
            if not watch.subscribers and self._watches.get(name) is watch:
                del self._watches[name]
                self._metrics.upstream_watches.set(len(self._watches))
                if watch.task is not None:
                    watch.task.cancel()

    async def close(self) -> None:
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        self._watches.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _relay(self, watch: _Watch, token: str) -> bool:
        """Hand each snapshot of one ``WatchRun`` to the subscribers; whether the run ended."""
        async with contextlib.aclosing(self._api.watch_run(watch.name, token)) as stream:
            async for run in stream:
                self._metrics.run_updates.inc()
                for sub in watch.subscribers:
                    sub.latest = run
                    sub.changed.set()
                if run.state in FINAL_RUN_STATES:
                    return True
        return False

    async def _pump(self, watch: _Watch) -> None:
        """Feed the watch's subscribers from one ``WatchRun`` until the run ends or nobody watches."""
        failures = 0
        final = False
        while watch.subscribers and not final:
            token = watch.subscribers[failures % len(watch.subscribers)].token
            try:
                final = await self._relay(watch, token)
                if final:
                    break
                await asyncio.sleep(RETRY_SECONDS)  # the api ended the stream early (it is stopping)
            except ApiError as exc:
                failures += 1
                log.info("watch of %s ended: %s %s", watch.name, exc.code.name, exc.message)
                if exc.code == grpc.StatusCode.NOT_FOUND or failures > 3 * len(watch.subscribers) + 3:
                    break
                await asyncio.sleep(RETRY_SECONDS)
        for sub in watch.subscribers:
            sub.ended, sub.final = True, final
            sub.changed.set()
        if self._watches.get(watch.name) is watch:
            del self._watches[watch.name]
            self._metrics.upstream_watches.set(len(self._watches))


async def wait_any(subs: list[Subscription], timeout: float) -> list[pb.DagRun]:
    """The newest snapshot of each subscription that has one, waiting up to ``timeout`` seconds for
    the first; empty after the timeout."""
    if not any(s.changed.is_set() for s in subs):
        waiters = [asyncio.create_task(s.changed.wait()) for s in subs]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
    found = []
    for sub in subs:
        if sub.changed.is_set():
            sub.changed.clear()
            if sub.latest is not None:
                found.append(sub.latest)
                sub.latest = None
    return found
