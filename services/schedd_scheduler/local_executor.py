"""The ``local`` and ``sequential`` executors: this scheduler process claims queued task instances
and runs them in a bounded pool of subprocesses on its own machine (``schedd_scheduler.executors``
says what they guarantee). Imported only when one is configured: it loads the task runtime
(``schedd_exec``, Jinja for templates) that a distributed scheduler never needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import uuid
from collections.abc import Awaitable, Sequence

from schedd.v1 import worker_pb2
from schedd_core.backoff import Backoff, retry
from schedd_core.clock import SystemClock
from schedd_core.permits import AttemptWindows, Permit
from schedd_exec.assignments import AssignmentBuilder
from schedd_exec.attempt_fence import AttemptFence
from schedd_exec.attempt_log import AttemptLogs, LogText
from schedd_exec.bundle_cache import BundleCache
from schedd_exec.environment import TaskEnvironment
from schedd_exec.executor import AttemptExecutor
from schedd_exec.outcome import Outcome
from schedd_store import bundles, dispatch
from schedd_store.batching import Batcher
from schedd_store.claims import AssignmentClaims
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptRef, AttemptResult, LogChunk, ReportStatus
from schedd_store.engine import is_transient

log = logging.getLogger(__name__)

#: Longest pause between two tries of storing a result.
MAX_RESULT_RETRY_DELAY = 2.0


class LocalExecutor:
    def __init__(
        self,
        engine: Engine,
        *,
        identity: str,
        parallelism: int,
        queues: Sequence[str] = ("default",),
        windows: AttemptWindows | None = None,
        kill_grace: float = 1.0,
        task_database_url: str = "",
        environment: TaskEnvironment | None = None,
    ) -> None:
        self._engine = engine
        self._worker_id = f"local.{identity}"
        self._parallelism = parallelism
        self._queues = list(queues)
        self._windows = windows or AttemptWindows()
        self._builder = AssignmentBuilder(AssignmentClaims(engine))
        self._wake = asyncio.Event()
        self._results: Batcher[AttemptResult, ReportStatus] = Batcher(
            "local-results", lambda batch: dispatch.apply_results(engine, batch)
        )
        self._logs: Batcher[LogChunk, None] = Batcher("local-logs", self._append_logs)
        self._attempt_logs = AttemptLogs()
        self._pending: set[asyncio.Task[object]] = set()
        self._bundles = BundleCache.for_owner(
            self._worker_id,
            self._fetch_bundle,
            traversable_by_others=bool(environment and environment.user),
        )
        self._executor = AttemptExecutor(
            python_workers=parallelism,
            kill_grace=kill_grace,
            on_output=self._output,
            on_done=self._done,
            task_database_url=task_database_url,
            bundles=self._bundles,
            environment=environment,
        )
        clock = SystemClock()
        self._permit = Permit(self._windows, kill_grace, clock)
        self._fence = AttemptFence(
            self._permit,
            self._executor.reaper,
            clock,
            running=lambda: len(self._executor.running),
            stop_all=self._stop_all,
        )
        self._sequence = itertools.count()
        self.completed = 0

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    async def _fetch_bundle(self, sha256: str) -> bytes:
        """A code bundle's archive, read from the store (a local executor has no registry)."""
        _, pieces = await bundles.read_bundle(self._engine, sha256)
        return b"".join([piece async for piece in pieces])

    async def run(self) -> None:
        await self._executor.start()
        await self._register()
        background = [
            asyncio.create_task(self._results.run()),
            asyncio.create_task(self._logs.run()),
            asyncio.create_task(self._heartbeats()),
            asyncio.create_task(self._fence.run()),
        ]
        self._wake.set()
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                free = self._parallelism - len(self._executor.running)
                if free <= 0 or not self._permit.may_start():
                    continue
                claimed = await self._builder.claim(slots=[self._worker_id] * free, queues=self._queues)
                for built in claimed:
                    self._executor.submit(built.assignment)
                if len(claimed) == free:
                    self._wake.set()  # there may be more
        finally:
            for task in background:
                task.cancel()
            with contextlib.suppress(Exception):
                await self._executor.close()
            self._bundles.close()

    async def _register(self) -> None:
        """Record this executor as a worker without a liveness lease; retried until stored."""
        backoff = Backoff(0.1, 5.0)
        while True:
            sequence = next(self._sequence)
            self._permit.sent(sequence)
            try:
                await dispatch.register_worker(
                    self._engine,
                    worker_id=self._worker_id,
                    hostname=socket.gethostname(),
                    queues=self._queues,
                    capacity=self._parallelism,
                    code_version="",
                    registry="",
                    incarnation=uuid.uuid4().hex,
                    running=[],
                    fence_window=self._windows.fence_window(self._permit.kill_grace),
                    silence_limit=self._windows.silence_limit,
                    replace_live=True,
                )
            except Exception as exc:
                log.warning(
                    "local executor: cannot record itself (%s); retrying in %.1fs", exc, backoff.delay
                )
                await asyncio.sleep(backoff.take())
                continue
            self._permit.acknowledged(sequence)
            self._fence.poke()
            return

    async def _heartbeats(self) -> None:
        """Store a heartbeat every interval; a stored one extends the permit to run attempts."""
        while True:
            await asyncio.sleep(self._windows.heartbeat_interval)
            attempts = [
                AttemptRef(a.attempt.task_instance_id, a.attempt.attempt_id, a.attempt.try_number)
                for a in self._executor.running
            ]
            sequence = next(self._sequence)
            self._permit.sent(sequence)
            try:
                stale = await dispatch.record_worker_heartbeat(self._engine, self._worker_id, attempts)
            except Exception as exc:
                log.warning("local executor: heartbeat not stored: %s", exc)
                continue
            self._permit.acknowledged(sequence)
            self._fence.poke()
            for attempt_id in stale:
                self._executor.cancel(attempt_id)

    def _stop_all(self, reason: str) -> None:
        for assignment in self._executor.running:
            log.warning("local executor: stopping attempt %s: %s", assignment.attempt.attempt_id, reason)
            self._executor.cancel(assignment.attempt.attempt_id)

    async def _append_logs(self, chunks: Sequence[LogChunk]) -> list[None]:
        await dispatch.append_logs(self._engine, chunks)
        return [None] * len(chunks)

    def _output(self, assignment: worker_pb2.Assignment, data: bytes) -> None:
        self._keep_log(assignment, self._attempt_logs.output(assignment.attempt.attempt_id, data))

    def _keep_log(self, assignment: worker_pb2.Assignment, pieces: list[LogText]) -> None:
        """Store pieces of an attempt's log, as a worker's registry does."""
        attempt = assignment.attempt
        for piece in pieces:
            self._spawn(
                self._store_log(
                    LogChunk(
                        worker_id=self._worker_id,
                        ti_id=attempt.task_instance_id,
                        attempt_id=attempt.attempt_id,
                        offset=piece.offset,
                        data=piece.text,
                    )
                )
            )

    def _done(self, assignment: worker_pb2.Assignment, outcome: Outcome) -> None:
        attempt = assignment.attempt
        self._keep_log(assignment, self._attempt_logs.ended(assignment, outcome))
        self.completed += 1
        self._spawn(
            self._store_result(
                AttemptResult(
                    worker_id=self._worker_id,
                    ti_id=attempt.task_instance_id,
                    attempt_id=attempt.attempt_id,
                    try_number=attempt.try_number,
                    succeeded=outcome.succeeded,
                    exit_code=outcome.exit_code,
                    error=outcome.error,
                    ended_at=outcome.ended_at,
                    started_at=outcome.started_at,
                    result_json=outcome.result_json,
                    abandoned=outcome.abandoned,
                    no_retry=outcome.no_retry,
                )
            )
        )
        self._wake.set()

    async def _store_log(self, chunk: LogChunk) -> None:
        """Output is best effort, as on a worker: a chunk that cannot be stored is dropped, with a warning."""
        try:
            await self._logs.submit(chunk)
        except Exception as exc:
            log.warning("local executor: dropped output of attempt %s: %s", chunk.attempt_id, exc)

    async def _store_result(self, result: AttemptResult) -> None:
        """Store an attempt's result, retrying what the database could not do now (a restart, a
        deadlock) with backoff until it is stored; a result the store refuses for good is logged."""
        try:
            await retry(
                lambda: self._results.submit(result),
                Backoff(0.05, MAX_RESULT_RETRY_DELAY),
                retry_on=is_transient,
                on_failure=lambda exc, _wait: log.warning(
                    "local executor: result of attempt %s not stored yet (%s); retrying",
                    result.attempt_id,
                    exc,
                ),
            )
        except Exception as exc:
            log.error("local executor: result of attempt %s not stored: %s", result.attempt_id, exc)

    def _spawn(self, coro: Awaitable[object]) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
