"""Drain and cancel notifications, taken as hints: the database says what a worker must do.

Any database role may ``pg_notify`` on any channel (task code connected as the task role included),
so a notification on ``schedd_workers`` or ``schedd_cancel`` only makes this registry read the
database again, for the workers connected to it:

- a drain hint names a worker: the registry tells that worker to drain only if
  ``workers.drain_requested`` is set (a user asked through the api);
- a cancel hint names task instances: the registry tells each of its workers to stop the attempts
  of those task instances it holds that are no longer current (``control.stale_attempts``); a
  current attempt is never stopped, whatever the hint said.

Hints are coalesced (one read per round, however many notifications came), so a flood of forged
notifications costs a read per round, not one per notification. A round that fails (the database
restarting) is tried again with backoff, keeping its hints. A hint that arrives while no connected
worker is concerned is dropped: a worker that connects later learns of a drain from its hello, and
its stale attempts are refused when it reports them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from schedd.v1 import worker_pb2
from schedd_core.backoff import Backoff
from schedd_registry.dispatcher import Dispatcher
from schedd_rpc import convert
from schedd_store import channels, control, dispatch
from schedd_store.database import Engine

log = logging.getLogger(__name__)

#: Task instance ids read in one statement.
CANCEL_BATCH = 10_000
MAX_BACKOFF = 5.0
CANCEL_REASON = "stopped by a user (cancel, clear or mark)"


class ControlHints:
    def __init__(self, engine: Engine, dispatcher: Dispatcher, *, drain_grace: float) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self._drain_grace = drain_grace
        self._drains: set[str] = set()
        self._cancels: set[int] = set()
        self._wake = asyncio.Event()

    def drain_requested(self, payload: str) -> None:
        """A ``schedd_workers`` notification: check the worker it names, if it is connected here."""
        session = self._dispatcher.session(payload)
        if session is not None and not session.draining:
            self._drains.add(payload)
            self._wake.set()

    def cancel_requested(self, payload: str) -> None:
        """A ``schedd_cancel`` notification: look for stale attempts of the task instances it names."""
        try:
            ids = channels.decode_ids(payload)
        except ValueError:
            log.warning("ignoring a malformed %s notification: %r", channels.CANCEL, payload[:80])
            return
        if ids and self._dispatcher.sessions:
            self._cancels.update(ids)
            self._wake.set()

    async def run(self) -> None:
        """Apply hints as they come, until cancelled."""
        backoff = Backoff(0.1, MAX_BACKOFF)
        while True:
            await self._wake.wait()
            self._wake.clear()
            drains, self._drains = self._drains, set()
            cancels, self._cancels = self._cancels, set()
            try:
                await self._drain(drains)
                await self._cancel(cancels)
                backoff.reset()
            except Exception as exc:
                log.warning(
                    "reading drain and cancel requests failed (%s); again in %.1fs", exc, backoff.delay
                )
                self._drains |= drains
                self._cancels |= cancels
                await asyncio.sleep(backoff.take())
                self._wake.set()

    async def _drain(self, worker_ids: Iterable[str]) -> None:
        for worker_id in sorted(worker_ids):
            session = self._dispatcher.session(worker_id)
            if session is None or session.draining:
                continue
            if await dispatch.drain_requested(self._engine, worker_id):
                session.send(
                    worker_pb2.RegistryMessage(
                        drain=worker_pb2.Drain(grace=convert.duration(self._drain_grace))
                    )
                )
            else:
                log.warning("ignoring a drain notification for worker %s: no drain was requested", worker_id)

    async def _cancel(self, ti_ids: set[int]) -> None:
        ordered = sorted(ti_ids)
        for start in range(0, len(ordered), CANCEL_BATCH):
            sessions = {s.worker_id: s for s in self._dispatcher.sessions}
            stale = await control.stale_attempts(
                self._engine, ordered[start : start + CANCEL_BATCH], sorted(sessions)
            )
            by_worker: dict[str, list[worker_pb2.AttemptRef]] = {}
            for a in stale:
                by_worker.setdefault(a.worker_id, []).append(
                    worker_pb2.AttemptRef(
                        task_instance_id=a.ti_id, try_number=a.try_number, attempt_id=a.attempt_id
                    )
                )
            for worker_id, attempts in by_worker.items():
                session = sessions[worker_id]
                session.send(
                    worker_pb2.RegistryMessage(
                        cancel=worker_pb2.CancelAttempts(attempts=attempts, reason=CANCEL_REASON)
                    )
                )
