"""The worker's stream to the registry: hello, credits, assignments in, results out.

The worker grants one credit per free slot. Results not yet acknowledged are
kept and sent again after a reconnect; the registry applies each at most once
(attempt-conditional updates), so re-sending is safe. The stream is re-opened
with exponential backoff after it breaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator

import grpc

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_rpc import convert
from schedd_worker.config import WorkerConfig
from schedd_worker.runner import run_assignment

log = logging.getLogger(__name__)


class WorkerConnection:
    def __init__(self, config: WorkerConfig) -> None:
        self._config = config
        self._running: dict[str, asyncio.Task[None]] = {}
        self._unacked: dict[str, worker_pb2.TaskResult] = {}
        self._outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
        self.completed = 0

    async def run(self, stop: asyncio.Event) -> None:
        delay = 0.1
        while not stop.is_set():
            try:
                async with grpc.aio.insecure_channel(self._config.registry) as channel:
                    await self._session(worker_pb2_grpc.WorkerRegistryStub(channel), stop)
                    delay = 0.1
            except grpc.aio.AioRpcError as exc:
                log.warning(
                    "registry stream broke: %s %s; reconnecting in %.1fs",
                    exc.code().name,
                    exc.details(),
                    delay,
                )
            if stop.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay * (0.5 + random.random()))
            delay = min(delay * 2, 5.0)
        for task in self._running.values():
            task.cancel()

    async def _session(self, stub: worker_pb2_grpc.WorkerRegistryStub, stop: asyncio.Event) -> None:
        self._outgoing = asyncio.Queue()
        cfg = self._config
        self._outgoing.put_nowait(
            worker_pb2.WorkerMessage(
                hello=worker_pb2.WorkerHello(
                    worker_id=cfg.worker_id,
                    hostname=cfg.hostname,
                    queues=list(cfg.queues),
                    capacity=cfg.capacity,
                    code_version=cfg.code_version,
                )
            )
        )
        for result in self._unacked.values():
            self._outgoing.put_nowait(worker_pb2.WorkerMessage(result=result))
        free = cfg.capacity - len(self._running)
        if free > 0:
            self._outgoing.put_nowait(worker_pb2.WorkerMessage(credit=worker_pb2.Credit(slots=free)))

        async def requests() -> AsyncIterator[worker_pb2.WorkerMessage]:
            while True:
                yield await self._outgoing.get()

        call = stub.Connect(requests())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            while True:
                reader = asyncio.ensure_future(call.read())
                done, _ = await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if reader not in done:
                    reader.cancel()
                    return
                message = reader.result()
                if message is grpc.aio.EOF:
                    raise_eof()
                self._handle(message)
        finally:
            stopper.cancel()
            call.cancel()

    def _handle(self, message: worker_pb2.RegistryMessage) -> None:
        kind = message.WhichOneof("message")
        if kind == "assignment":
            attempt_id = message.assignment.attempt.attempt_id
            if attempt_id not in self._running:
                self._running[attempt_id] = asyncio.create_task(self._execute(message.assignment))
        elif kind == "ack":
            self._unacked.pop(message.ack.attempt.attempt_id, None)
            if message.ack.code != grpc.StatusCode.OK.value[0]:
                log.warning(
                    "registry rejected the result of attempt %s: %s",
                    message.ack.attempt.attempt_id,
                    message.ack.message,
                )
        elif kind == "welcome":
            log.info("connected to registry as %s", message.welcome.worker_id)

    async def _execute(self, assignment: worker_pb2.Assignment) -> None:
        attempt = assignment.attempt
        try:
            outcome = await run_assignment(assignment, kill_grace=self._config.kill_grace)
            result = worker_pb2.TaskResult(
                attempt=attempt,
                outcome=worker_pb2.TASK_OUTCOME_SUCCEEDED
                if outcome.succeeded
                else worker_pb2.TASK_OUTCOME_FAILED,
                exit_code=outcome.exit_code,
                error=outcome.error,
                start_time=convert.ts(outcome.started_at),
                end_time=convert.ts(outcome.ended_at),
            )
            self._unacked[attempt.attempt_id] = result
            self._outgoing.put_nowait(worker_pb2.WorkerMessage(result=result))
            self.completed += 1
        finally:
            self._running.pop(attempt.attempt_id, None)
            self._outgoing.put_nowait(worker_pb2.WorkerMessage(credit=worker_pb2.Credit(slots=1)))


def raise_eof() -> None:
    raise grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        "the registry closed the stream",
    )
