"""Following runs: ``RunService.WatchRun`` streams a run each time it changes, until it ends.

Every stream watching one run in one view (``RunView``: full, or a summary whose read does not
grow with the run) shares one poller (``run_pollers``): one database read per wake-up of that run,
however many streams watch it, started by the first stream and stopped when the last one leaves. A
watched run is read again as soon as a notification names it (a result, a manual change, a new
run: ``schedd_runs``, ``schedd_runs_handed_off``) and at least every ``RECHECK_SECONDS``
otherwise, since the leader's own transitions (a task queued, the run finished) send no
notification on that channel. A message is sent only when the run differs from the last one this
stream sent; the stream ends after the run's final state has been sent, or when the client goes
away. How many streams may be open is capped before they get here (``schedd_rpc.stream_limits``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry, Counter, Gauge

from schedd.v1 import resources_pb2 as pb
from schedd_api.run_pollers import FINAL, ReadRun, RunPoller
from schedd_store import channels

log = logging.getLogger(__name__)


class RunWatchers:
    """The pollers of the runs being watched, woken by notifications (see the module docstring).
    ``registry`` gets ``schedd_api_run_pollers`` (poll loops running) and ``schedd_api_run_polls``
    (reads they made)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        #: By (run pk, view).
        self._pollers: dict[tuple[int, int], RunPoller] = {}
        self._poller_gauge = Gauge(
            "schedd_api_run_pollers",
            "Poll loops running for watched runs (one per run, however many streams watch it).",
            registry=registry,
        )
        self._polls = Counter(
            "schedd_api_run_polls", "Reads of watched runs by their pollers.", registry=registry
        )

    def notified(self, payload: str) -> None:
        try:
            changed = {run_pk for run_pk, _ in channels.decode_changes(payload)}
        except ValueError:
            log.warning("ignoring a malformed %s payload: %r", channels.RUNS, payload[:80])
            return
        for key, poller in self._pollers.items():
            if key[0] in changed:
                poller.wake()

    async def reconnected(self) -> None:
        """Notifications may have been missed: read every watched run again."""
        for poller in self._pollers.values():
            poller.wake()

    async def follow(self, run_pk: int, read: ReadRun, view: int = 0) -> AsyncIterator[pb.DagRun]:
        """The run (as ``read`` returns it in ``view``) each time it changed, ending with its final
        state."""
        key = (run_pk, view)
        poller = self._pollers.get(key)
        if poller is None or poller.failed:
            poller = self._pollers[key] = RunPoller(read, self._polls.inc)
            self._poller_gauge.inc()
            poller.when_done(self._poller_gauge.dec)
        subscriber = poller.subscribe()
        try:
            last = b""
            while True:
                run = await subscriber.take()
                encoded = run.SerializeToString(deterministic=True)
                if encoded != last:
                    yield run
                    last = encoded
                if run.state in FINAL:
                    return
        finally:
            if poller.unsubscribe(subscriber):
                poller.stop()
                if self._pollers.get(key) is poller:
                    del self._pollers[key]
