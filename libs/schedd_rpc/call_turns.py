"""Turns at a service's database, shared fairly between its callers.

The api has a few database connections and each call needs one or more in turn (its token's
lookup, its statements, its audit row). Waiting for a connection directly is first come, first
served: one client with 1,000 ``CreateRun`` calls in flight held every other caller back for
seconds. :class:`CallTurns` lets at most ``capacity`` calls in at once (the api: its
``db_pool_size``, half the connections its engine may open, so a call inside rarely waits for one
and the streams' pollers and exempt calls below have the other half) and queues the rest by
*lane*, one lane per caller, handing each freed turn to the next lane in round-robin order: a
caller with one call waits for at most one call of each other busy lane, however many calls those
lanes have queued. Calls of one lane are served in the order they came.

The access interceptor (``schedd_rpc.access``) keys lanes by the token the call presents (its
public id, before the token is checked: checking it needs a turn), or by the peer's address for a
call without a well-formed token. So a client that forges many token ids gets a lane for each, and
each of its calls is refused at its first statement.

A call that waits mostly on something other than the database would hold a turn all that time:
its method is listed in ``exempt`` and takes none (the api's ``GetLeader``, which asks etcd, with a
2 s timeout per request while etcd is out of reach); what it reads of the database it borrows first
come, first served, as before.

Guaranteed: at most ``capacity`` turns are held at once; a turn is given back however its holder
ends (error, cancellation, abort), and a call cancelled while it waits takes none. Not guaranteed:
fairness in time (a lane's turn is one call, however long it takes), nor across processes (each api
replica keeps its own turns).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CollectorRegistry, Gauge


class CallTurns:
    """At most ``capacity`` turns held at once, waiting lanes served round-robin (module docstring);
    ``registry`` gets the gauge ``schedd_api_calls_waiting`` (calls waiting for a turn)."""

    def __init__(
        self,
        capacity: int,
        *,
        exempt: frozenset[str] = frozenset(),
        registry: CollectorRegistry | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        #: The methods (``/package.Service/Method``) whose calls take no turn.
        self.exempt = exempt
        self._free = capacity
        #: Waiting calls by lane; the first lane is served next, then goes to the back.
        self._lanes: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._waiting = 0
        self._gauge = Gauge(
            "schedd_api_calls_waiting",
            "Calls waiting for a turn at this api's database connections.",
            registry=registry,
        )

    @asynccontextmanager
    async def turn(self, lane: str) -> AsyncIterator[None]:
        """Hold a turn for the block, waiting in ``lane`` while every turn is held."""
        await self._take(lane)
        try:
            yield
        finally:
            self._give_back()

    @property
    def waiting(self) -> int:
        """Calls waiting for a turn now."""
        return self._waiting

    async def _take(self, lane: str) -> None:
        if self._free > 0 and not self._lanes:
            self._free -= 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lanes.setdefault(lane, deque()).append(granted)
        self._counted(+1)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._give_back()  # handed a turn as it was cancelled: pass it on
            else:
                self._forget(lane, granted)
            raise

    def _give_back(self) -> None:
        """Hand the turn to the next lane's first call, else free it."""
        while self._lanes:
            lane, waiters = next(iter(self._lanes.items()))
            granted = waiters.popleft()
            if waiters:
                self._lanes.move_to_end(lane)
            else:
                del self._lanes[lane]
            self._counted(-1)
            if not granted.done():  # else cancelled, its call not yet told
                granted.set_result(None)
                return
        self._free += 1

    def _forget(self, lane: str, granted: asyncio.Future[None]) -> None:
        """Take a cancelled call out of its lane (it may already be gone)."""
        waiters = self._lanes.get(lane)
        if waiters is None or granted not in waiters:
            return
        waiters.remove(granted)
        if not waiters:
            del self._lanes[lane]
        self._counted(-1)

    def _counted(self, change: int) -> None:
        self._waiting += change
        self._gauge.set(self._waiting)
