"""Relaying outbox events to their callbacks: webhooks (HTTP POST of the event as JSON, signed when
the target names a signing connection), emails (SMTP, through a connection) and Python callables
(run on a connected worker, with the event as ``params``; a notifier class is one). Events: a task's
``failure``, ``retry`` and ``success``, a run's ``failure`` and ``success``, and a run's
``deadline_missed``.

Every registry replica relays; rows are shared with ``SKIP LOCKED`` and a lease. An event with
several callbacks is retried whole when one fails, so a callback may see an event more than once:
callbacks must be idempotent (the event carries ``event_id``). A failing event is retried with
backoff and given up after ``max_attempts`` (``outbox.failed_at``, ``last_error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Sequence
from typing import Any

from schedd.v1 import resources_pb2 as pb, worker_pb2
from schedd_core.backoff import Backoff
from schedd_core.connections import ConnectionValue
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.notifications import post_webhook, send_email
from schedd_rpc import convert
from schedd_store import outbox
from schedd_store.database import Engine
from schedd_store.outbox import OutboxEvent
from schedd_store.secrets import CONNECTION, SecretStore
from schedd_store.versions import VersionCache

log = logging.getLogger(__name__)

CALLBACK_TIMEOUT = 60.0
LEASE = 120.0


class CallbackRelay:
    def __init__(
        self,
        engine: Engine,
        dispatcher: Dispatcher,
        *,
        max_attempts: int = 10,
        secrets: SecretStore | None = None,
    ) -> None:
        self._engine = engine
        self._secrets = secrets
        self._dispatcher = dispatcher
        self._versions = VersionCache()
        self._max_attempts = max_attempts
        self._wake = asyncio.Event()
        #: Callbacks sent and not answered yet, by (worker id it was sent to, callback id).
        self._waiting: dict[tuple[str, str], asyncio.Future[tuple[bool, str]]] = {}
        self._ids = itertools.count(1)
        self._turn = itertools.count()
        self.delivered = 0

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    def callback_done(self, worker_id: str, done: worker_pb2.CallbackDone) -> None:
        """A worker's answer to a callback; only the worker the callback was sent to can answer it."""
        future = self._waiting.pop((worker_id, done.callback_id), None)
        if future is not None and not future.done():
            future.set_result((done.ok, done.error))

    async def run(self) -> None:
        """Relay until cancelled; a failure to read the outbox (the database restarting) is retried
        with backoff, so callbacks resume once the database is back."""
        backoff = Backoff(0.1, 5.0)
        while True:
            try:
                events = await outbox.take_due(self._engine, limit=50, lease=LEASE)
                if events:
                    await asyncio.gather(*(self._deliver(e) for e in events))
                    continue
                due = await outbox.seconds_until_due(self._engine)
                backoff.reset()
            except Exception as exc:
                log.warning("callback relay: cannot read the outbox (%s); again in %.1fs", exc, backoff.delay)
                await asyncio.sleep(backoff.take())
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 60.0 if due is None else max(0.05, min(due, 60.0)))
            self._wake.clear()

    async def _deliver(self, event: OutboxEvent) -> None:
        try:
            callbacks, body = await self._resolve(event)
            for callback in callbacks:
                await self._send(callback, body)
        except Exception as exc:
            delay = min(2.0**event.attempts, 300.0)
            log.warning("delivering event %d failed (attempt %d): %s", event.id, event.attempts + 1, exc)
            await outbox.mark_failed(
                self._engine, event.id, error=str(exc), delay=delay, max_attempts=self._max_attempts
            )
            return
        await outbox.mark_delivered(self._engine, [event.id])
        self.delivered += 1

    async def _send(self, callback: pb.Callback, body: dict[str, Any]) -> None:
        kind = callback.WhichOneof("target")
        if kind == "webhook_url":
            await asyncio.to_thread(post_webhook, callback.webhook_url, body)
        elif kind == "webhook":
            key = ""
            if callback.webhook.signing_connection:
                key = (await self._connection(callback.webhook.signing_connection)).password
            await asyncio.to_thread(post_webhook, callback.webhook.url, body, signing_key=key)
        elif kind == "email":
            smtp = await self._connection(callback.email.connection)
            await asyncio.to_thread(send_email, callback.email, body, smtp)
        else:
            await self._run_on_worker(callback.python.target, body)

    async def _connection(self, conn_id: str) -> ConnectionValue:
        if self._secrets is None:
            raise RuntimeError(f"connection {conn_id!r} is needed but this registry has no secrets store")
        return (await self._secrets.get(CONNECTION, conn_id, with_value=True)).connection()

    async def _resolve(self, event: OutboxEvent) -> tuple[list[pb.Callback], dict[str, Any]]:
        if event.dag_version_id is None:
            return [], {}
        async with self._engine.connect() as conn:
            await self._versions.load(conn, [event.dag_version_id])
        spec = self._versions.spec(event.dag_version_id)
        kind = event.payload.get("event", "")
        body = {**event.payload, "event_id": event.id, "run_id": event.run_id}
        body.pop("run_pk", None)
        body.pop("ti_id", None)
        chosen: Sequence[pb.Callback]
        if event.topic == "task_callback":
            task = self._versions.task(event.dag_version_id, event.payload["task_id"])
            chosen = {"success": task.on_success, "failure": task.on_failure, "retry": task.on_retry}.get(
                kind, []
            )
        else:
            chosen = {
                "success": spec.on_success,
                "failure": spec.on_failure,
                "deadline_missed": spec.deadline.callbacks,
            }.get(kind, [])
        return list(chosen), body

    async def _run_on_worker(self, target: str, body: dict[str, Any]) -> None:
        sessions = [s for s in self._dispatcher.sessions if not s.closed]
        if not sessions:
            raise RuntimeError("no worker is connected to run the callback")
        session = sessions[next(self._turn) % len(sessions)]
        callback_id = f"cb-{next(self._ids)}"
        future: asyncio.Future[tuple[bool, str]] = asyncio.get_running_loop().create_future()
        key = (session.worker_id, callback_id)
        self._waiting[key] = future
        session.send(
            worker_pb2.RegistryMessage(
                run_callback=worker_pb2.RunCallback(
                    callback_id=callback_id,
                    python=pb.PythonCallable(target=target),
                    event=convert.struct(body),
                )
            )
        )
        try:
            ok, error = await asyncio.wait_for(future, CALLBACK_TIMEOUT)
        finally:
            self._waiting.pop(key, None)
        if not ok:
            raise RuntimeError(f"callback {target} failed: {error}")
