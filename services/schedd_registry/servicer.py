"""The worker stream: translates protocol messages to dispatcher and result-batcher calls."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import grpc
from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_core.errors import InvalidArgument
from schedd_core.spec import check_id
from schedd_registry.config import RegistryConfig
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.results import ResultBatcher
from schedd_registry.sessions import WorkerSession
from schedd_rpc import convert
from schedd_store import dispatch
from schedd_store.dispatch import AttemptResult, ReportStatus

log = logging.getLogger(__name__)

_ACK_CODE = {
    ReportStatus.APPLIED: grpc.StatusCode.OK,
    ReportStatus.DUPLICATE: grpc.StatusCode.OK,
    ReportStatus.STALE: grpc.StatusCode.FAILED_PRECONDITION,
}


class WorkerRegistryServicer(worker_pb2_grpc.WorkerRegistryServicer):
    def __init__(
        self, engine: AsyncEngine, dispatcher: Dispatcher, results: ResultBatcher, config: RegistryConfig
    ) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self._results = results
        self._config = config

    async def Connect(
        self, request_iterator: AsyncIterator[worker_pb2.WorkerMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.RegistryMessage]:
        first = await anext(aiter(request_iterator), None)
        if first is None:
            return
        try:
            hello = _validate_hello(first)
        except InvalidArgument as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            return
        await dispatch.register_worker(
            self._engine,
            worker_id=hello.worker_id,
            hostname=hello.hostname,
            queues=list(hello.queues),
            capacity=hello.capacity,
            code_version=hello.code_version,
            registry=self._config.identity,
        )
        session = WorkerSession(
            worker_id=hello.worker_id, queues=tuple(hello.queues) or ("default",), capacity=hello.capacity
        )
        self._dispatcher.attach(session)
        log.info(
            "worker %s connected (queues %s, capacity %d)",
            session.worker_id,
            session.queues,
            session.capacity,
        )
        reader = asyncio.create_task(self._read(request_iterator, session))
        try:
            yield worker_pb2.RegistryMessage(
                welcome=worker_pb2.Welcome(
                    worker_id=hello.worker_id,
                    heartbeat_interval=convert.duration(self._config.heartbeat_interval),
                )
            )
            while True:
                getter = asyncio.ensure_future(session.outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                    continue
                getter.cancel()
                break
        finally:
            session.closed = True
            self._dispatcher.detach(session)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            log.info("worker %s disconnected", session.worker_id)
            with contextlib.suppress(Exception):
                await dispatch.mark_worker_gone(
                    self._engine, worker_id=session.worker_id, registry=self._config.identity
                )

    async def _read(self, requests: AsyncIterator[worker_pb2.WorkerMessage], session: WorkerSession) -> None:
        pending: set[asyncio.Task[None]] = set()
        async for message in requests:
            kind = message.WhichOneof("message")
            if kind == "credit":
                self._dispatcher.grant(session, message.credit.slots)
            elif kind == "result":
                task = asyncio.create_task(self._report(message.result, session))
                pending.add(task)
                task.add_done_callback(pending.discard)
            elif kind == "heartbeat":
                pass  # recorded by the heartbeat tracker; see the zombie detection in the scheduler
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _report(self, result: worker_pb2.TaskResult, session: WorkerSession) -> None:
        status = await self._results.submit(
            AttemptResult(
                ti_id=result.attempt.task_instance_id,
                attempt_id=result.attempt.attempt_id,
                succeeded=result.outcome == worker_pb2.TASK_OUTCOME_SUCCEEDED,
                exit_code=result.exit_code,
                error=result.error[:4000],
                ended_at=convert.from_ts(result.end_time),
                started_at=convert.from_ts(result.start_time) if result.HasField("start_time") else None,
            )
        )
        code = _ACK_CODE[status]
        message = "" if code == grpc.StatusCode.OK else "attempt is no longer current; result discarded"
        session.send(
            worker_pb2.RegistryMessage(
                ack=worker_pb2.ReportAck(attempt=result.attempt, code=code.value[0], message=message)
            )
        )


def _validate_hello(message: worker_pb2.WorkerMessage) -> worker_pb2.WorkerHello:
    if message.WhichOneof("message") != "hello":
        raise InvalidArgument("message", "the first message on a worker stream must be hello")
    hello = message.hello
    check_id("hello.worker_id", hello.worker_id)
    if hello.capacity <= 0:
        raise InvalidArgument("hello.capacity", "must be positive")
    for i, queue in enumerate(hello.queues):
        check_id(f"hello.queues[{i}]", queue)
    return hello
