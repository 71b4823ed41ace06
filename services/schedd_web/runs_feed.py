"""New runs of a DAG for the grids that show its newest runs: one bounded poll per DAG per process.

The api streams one run's changes (``WatchRun``) but has no stream of a DAG's new runs, so the
feed asks ``ListRuns`` for the DAG's newest run every :data:`POLL_SECONDS`, under the token of a
current follower (the first; when its call fails, the next one's), and wakes each follower whose
newest run differs from the one it knows. Every grid of the DAG in this process shares that poll.

Guaranteed: at most one ``ListRuns`` per DAG per :data:`POLL_SECONDS` per process however many
grids are open, and none once the DAG's last follower left; a follower is woken within about
:data:`POLL_SECONDS` of a new run being listed. A poll the api keeps refusing ends the followers
(``ended``): their pages then reconnect, which reads everything anew. Not guaranteed: each run is
reported (two runs made within one interval wake a follower once, for the newer); a follower's own
right to read the DAG is checked by the page that loads its grid, not by the poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web

from schedd.v1 import api_pb2
from schedd_web.api import Api, ApiError

log = logging.getLogger("schedd.web.feed")

#: Seconds between two polls of one DAG's newest run.
POLL_SECONDS = 2.0


@dataclass(eq=False)
class Follower:
    token: str
    #: the run id of the newest run the follower knows ("" for none)
    newest: str
    #: set when ``newest`` changed or the feed ended
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False


@dataclass(eq=False)
class _Poll:
    dag_id: str
    followers: list[Follower] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class DagRunsFeed:
    def __init__(self, api: Api, interval: float = POLL_SECONDS) -> None:
        self._api = api
        self._interval = interval
        self._polls: dict[str, _Poll] = {}

    @property
    def polling(self) -> int:
        """How many DAGs are polled."""
        return len(self._polls)

    @contextlib.asynccontextmanager
    async def follow(self, dag_id: str, token: str, newest: str) -> AsyncIterator[Follower]:
        """Follow the DAG's newest run, starting from ``newest`` (the run id a page shows); leaving
        the block stops following (and the poll, with the DAG's last follower)."""
        follower = Follower(token, newest)
        poll = self._polls.get(dag_id)
        if poll is None:
            poll = self._polls[dag_id] = _Poll(dag_id)
            poll.task = asyncio.create_task(self._run(poll), name=f"runs of {dag_id}")
        poll.followers.append(follower)
        try:
            yield follower
        finally:
            poll.followers.remove(follower)
            if not poll.followers and self._polls.get(dag_id) is poll:
                del self._polls[dag_id]
                if poll.task is not None:
                    poll.task.cancel()

    async def close(self) -> None:
        tasks = [p.task for p in self._polls.values() if p.task is not None]
        self._polls.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _newest(self, dag_id: str, token: str) -> str:
        request = api_pb2.ListRunsRequest(parent=f"dags/{dag_id}", page_size=1)
        listed = await self._api.call(self._api.runs.ListRuns, request, token)
        return str(listed.runs[0].run_id) if listed.runs else ""

    async def _run(self, poll: _Poll) -> None:
        failures = 0
        while poll.followers:
            await asyncio.sleep(self._interval)
            if not poll.followers:
                break
            token = poll.followers[failures % len(poll.followers)].token
            try:
                newest = await self._newest(poll.dag_id, token)
            except ApiError as exc:
                failures += 1
                log.info("runs of %s not listed: %s %s", poll.dag_id, exc.code.name, exc.message)
                if failures > 3 * len(poll.followers) + 3:
                    break
                continue
            failures = 0
            for follower in poll.followers:
                if follower.newest != newest:
                    follower.newest = newest
                    follower.changed.set()
        for follower in poll.followers:
            follower.ended = True
            follower.changed.set()
        if self._polls.get(poll.dag_id) is poll:
            del self._polls[poll.dag_id]


FEED = web.AppKey("feed", DagRunsFeed)
