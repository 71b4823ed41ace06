"""The worker stream: translates protocol messages to dispatcher, batcher and store calls.

Acknowledged means stored: a Welcome is sent once the hello is recorded, a HeartbeatAck once
the heartbeat is, and a ReportAck once the result is. A result that cannot be written (the
database restarting, say) is retried with backoff for as long as the stream is open; when it
closes, the worker still holds the result and sends it again on its next stream.

Who speaks: every report on a stream is applied as the report of the worker id the stream said
hello as (bound to the token's worker id when the token has one), never of an id a message names;
the store applies it only if that worker holds the attempt. A hello asking for a queue outside the
token's queues, and a second stream for a worker id whose stream is live, are refused before
anything is written. ``Enroll`` issues a worker its own token (``schedd_store.tokens.enroll``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

import grpc

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_auth import principal
from schedd_core.clock import Clock, SystemClock
from schedd_core.errors import InvalidArgument, PermissionDenied, Unavailable
from schedd_core.identifiers import check_id
from schedd_core.limits import MAX_LOG_CHUNK_BYTES
from schedd_core.permits import AttemptWindows
from schedd_registry.bundles import stream_bundle
from schedd_registry.config import RegistryConfig
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.results import ResultReports
from schedd_registry.sessions import WorkerSession
from schedd_rpc import convert, stream_batches
from schedd_store import dispatch, tokens
from schedd_store.batching import Batcher
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptRef, LogChunk

log = logging.getLogger(__name__)


class WorkerRegistryServicer(worker_pb2_grpc.WorkerRegistryServicer):
    def __init__(
        self,
        engine: Engine,
        dispatcher: Dispatcher,
        config: RegistryConfig,
        *,
        clock: Clock | None = None,
        results_engine: Engine | None = None,
    ) -> None:
        """``clock``: where the times the servicer reads come from (the system's when None);
        ``results_engine``: what results are applied through (``engine`` when None)."""
        self._engine = engine
        self._clock = clock or SystemClock()
        self._dispatcher = dispatcher
        self._config = config
        self.reports = ResultReports(results_engine or engine, dispatcher)
        #: The batcher of results (its loop is run by the registry's main).
        self.results = self.reports.batcher
        self.logs: Batcher[LogChunk, None] = Batcher("logs", self._append_logs)
        self._background: set[asyncio.Task[None]] = set()
        #: Receives workers' answers to callbacks (set by the callback relay), with the answering
        #: stream's worker id.
        self.on_callback_done: Callable[[str, worker_pb2.CallbackDone], None] | None = None

    async def _append_logs(self, chunks: Sequence[LogChunk]) -> list[None]:
        await dispatch.append_logs(self._engine, chunks)
        return [None] * len(chunks)

    def _detached(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a store write to completion even if the worker's call ends; failures are logged."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("recording a worker's state failed: %s", t.exception())

        task.add_done_callback(done)

    async def FetchBundle(
        self, request: worker_pb2.FetchBundleRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.BundleChunk]:
        """The archive of a code bundle, in chunks (see ``schedd_registry.bundles``)."""
        async for chunk in stream_bundle(self._engine, request.sha256):
            yield chunk

    async def Enroll(
        self, request: worker_pb2.EnrollRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.EnrollResponse:
        """A worker token bound to the requested worker id, for the caller's enrollment token."""
        caller = principal.current()
        if caller is None or not caller.token_id:
            raise PermissionDenied("enrolling needs an enrollment token (authentication is disabled)")
        record, token = await tokens.enroll(self._engine, caller.token_id, request.worker_id)
        log.info("worker %s enrolled with %s as token %s", request.worker_id, caller.name, record.name)
        return worker_pb2.EnrollResponse(
            worker_id=request.worker_id, token=str(token), queues=list(record.queues), name=record.name
        )

    async def Connect(
        self, request_iterator: AsyncIterator[worker_pb2.WorkerMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.RegistryMessage]:
        first = await anext(aiter(request_iterator), None)
        if first is None:
            return
        windows = self._config.windows
        hello = _validate_hello(first, windows)
        queues = tuple(hello.queues) or ("default",)
        _check_caller(principal.current(), hello.worker_id, queues)
        kill_grace = hello.kill_grace.ToTimedelta().total_seconds()
        drain = await self._register(hello, windows, kill_grace)
        session = WorkerSession(
            worker_id=hello.worker_id,
            queues=queues,
            capacity=hello.capacity,
            incarnation=hello.incarnation,
            last_heard=self._clock.monotonic(),
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
                    heartbeat_interval=convert.duration(windows.heartbeat_interval),
                    ack_window=convert.duration(windows.ack_window),
                    silence_limit=convert.duration(windows.silence_limit),
                    idle_heartbeat_interval=convert.duration(windows.idle_heartbeat_interval),
                )
            )
            if drain:
                session.send(_drain_message(self._config.drain_grace))
            while True:
                getter = asyncio.ensure_future(session.outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if session.end_reason:
                    getter.cancel()
                    raise Unavailable(session.end_reason)
                if getter in done:
                    # acks ready together (a batch of results applied at once) go as one message
                    for message in stream_batches.drain(getter.result(), session.outbox, "ack", _acks):
                        yield message
                    continue
                getter.cancel()
                if not reader.cancelled() and isinstance(reader.exception(), InvalidArgument):
                    raise reader.exception()  # type: ignore[misc]  # a malformed message: INVALID_ARGUMENT
                break
        finally:
            session.closed = True
            self._dispatcher.detach(session)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            log.info("worker %s disconnected", session.worker_id)
            if self._dispatcher.session(session.worker_id) is None:  # no newer stream of it took over here
                # Not tied to this call: the call is being cancelled, the record must still be written.
                self._detached(
                    dispatch.mark_worker_gone(
                        self._engine,
                        worker_id=session.worker_id,
                        registry=self._config.identity,
                        incarnation=session.incarnation,
                    )
                )

    async def _register(
        self, hello: worker_pb2.WorkerHello, windows: AttemptWindows, kill_grace: float
    ) -> bool:
        return await dispatch.register_worker(
            self._engine,
            worker_id=hello.worker_id,
            hostname=hello.hostname,
            queues=list(hello.queues),
            capacity=hello.capacity,
            code_version=hello.code_version,
            registry=self._config.identity,
            incarnation=hello.incarnation,
            running=[_ref(a) for a in hello.running],
            fence_window=windows.fence_window(kill_grace),
            silence_limit=windows.silence_limit,
        )

    async def _read(self, requests: AsyncIterator[worker_pb2.WorkerMessage], session: WorkerSession) -> None:
        pending: set[asyncio.Task[object]] = set()

        def spawn(coro: Awaitable[object]) -> None:
            task: asyncio.Task[object] = asyncio.ensure_future(coro)
            pending.add(task)
            task.add_done_callback(pending.discard)

        async for message in requests:
            kind = message.WhichOneof("message")
            if kind == "credit":
                self._dispatcher.grant(session, message.credit.slots)
            elif kind in ("result", "results"):
                results = [message.result] if kind == "result" else message.results.results
                for result in results:
                    if result.credit > 0:  # granted first: its report keeps it for a hand-off at once
                        self._dispatcher.grant(session, result.credit)
                    spawn(self.reports.report(result, session))
            elif kind == "log" and len(message.log.data) <= MAX_LOG_CHUNK_BYTES:
                chunk = message.log
                spawn(
                    self._store_log(
                        LogChunk(
                            worker_id=session.worker_id,
                            ti_id=chunk.attempt.task_instance_id,
                            attempt_id=chunk.attempt.attempt_id,
                            offset=chunk.offset,
                            data=chunk.data,
                        )
                    )
                )
            elif kind == "heartbeat":
                spawn(self._heartbeat(message.heartbeat, session))
            elif kind == "callback_done":
                if self.on_callback_done is not None:
                    self.on_callback_done(session.worker_id, message.callback_done)
            elif kind == "draining":
                session.draining = True
                self._detached(dispatch.mark_worker_draining(self._engine, session.worker_id))
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _store_log(self, chunk: LogChunk) -> None:
        """Output is best effort: a chunk that cannot be stored is dropped, with a warning."""
        try:
            await self.logs.submit(chunk)
        except Exception as exc:
            log.warning(
                "dropped %d bytes of output of attempt %s: %s", len(chunk.data), chunk.attempt_id, exc
            )

    async def _heartbeat(self, heartbeat: worker_pb2.TaskHeartbeat, session: WorkerSession) -> None:
        """Store the heartbeat, then acknowledge it; an unstored heartbeat is not acknowledged (the
        worker's permit then runs out, as it must: nothing here vouches for it)."""
        refs = {a.attempt_id: a for a in heartbeat.attempts}
        forgotten = session.received_but_not_listed(heartbeat.assignments_received, set(refs))
        try:
            stale = await dispatch.record_worker_heartbeat(
                self._engine,
                session.worker_id,
                [_ref(a) for a in refs.values()],
                lost=[_ref(a) for a in forgotten],
            )
        except Exception as exc:
            log.warning("heartbeat of worker %s not stored: %s", session.worker_id, exc)
            return
        session.heard(self._clock.monotonic(), holds_attempts=bool(refs))
        self._dispatcher.heard(session)
        session.send(
            worker_pb2.RegistryMessage(heartbeat_ack=worker_pb2.HeartbeatAck(sequence=heartbeat.sequence))
        )
        if stale:
            session.send(
                worker_pb2.RegistryMessage(
                    cancel=worker_pb2.CancelAttempts(
                        attempts=[refs[a] for a in sorted(stale)],
                        reason="the attempt is no longer current (failed over, cleared or cancelled)",
                    )
                )
            )


def _check_caller(caller: principal.Principal | None, worker_id: str, queues: tuple[str, ...]) -> None:
    """Refuse a hello its token does not allow: another worker id than the token's, or a queue
    outside the token's queues."""
    if caller is None:
        return
    if caller.worker_id and caller.worker_id != worker_id:
        raise PermissionDenied(
            f"token {caller.name!r} may only connect as worker {caller.worker_id!r}, not {worker_id!r}"
        )
    outside = [q for q in queues if caller.queues and q not in caller.queues]
    if outside:
        raise PermissionDenied(
            f"token {caller.name!r} may only subscribe to the queues {', '.join(caller.queues)}, "
            f"not {', '.join(outside)}"
        )


def _ref(a: worker_pb2.AttemptRef) -> AttemptRef:
    return AttemptRef(ti_id=a.task_instance_id, attempt_id=a.attempt_id, try_number=a.try_number)


def _drain_message(grace: float) -> worker_pb2.RegistryMessage:
    return worker_pb2.RegistryMessage(drain=worker_pb2.Drain(grace=convert.duration(grace)))


def _validate_hello(message: worker_pb2.WorkerMessage, windows: AttemptWindows) -> worker_pb2.WorkerHello:
    if message.WhichOneof("message") != "hello":
        raise InvalidArgument("message", "the first message on a worker stream must be hello")
    hello = message.hello
    try:
        windows.check_kill_grace(hello.kill_grace.ToTimedelta().total_seconds())
    except ValueError as exc:
        raise InvalidArgument("hello.kill_grace", str(exc)) from None
    check_id("hello.worker_id", hello.worker_id)
    if hello.capacity <= 0:
        raise InvalidArgument("hello.capacity", "must be positive")
    for i, queue in enumerate(hello.queues):
        check_id(f"hello.queues[{i}]", queue)
    return hello


def _acks(acks: Sequence[worker_pb2.ReportAck]) -> worker_pb2.RegistryMessage:
    return worker_pb2.RegistryMessage(acks=worker_pb2.ReportAcks(acks=acks))
