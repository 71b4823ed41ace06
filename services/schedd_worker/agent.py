"""The worker's behaviour over its registry stream: hello, credits, assignments in; heartbeats,
output and results out; cancellation and draining.

Results not yet acknowledged are kept and sent again after a reconnect; the
registry applies each at most once (attempt-conditional updates), so re-sending
is safe. The hello of every (re)connect lists what this worker runs, so the
registry can fail over anything assigned to it that never arrived. The stream is
re-opened with exponential backoff after it breaks, to the next registry of the
configured list each time (any registry serves any worker). Output is best effort:
what is produced while disconnected is not stored.

Attempt fencing (``schedd_core.permits``): the worker runs its attempts only while
its permit holds; a Welcome acknowledges the hello, a HeartbeatAck a heartbeat, and
``AttemptFence`` stops everything when neither they nor the etcd lease vouch for the
worker any more. An idle worker heartbeats seldom (``schedd_worker.heartbeats``); an
assignment that arrives when the registry has not acknowledged the worker lately waits
for the acknowledgement of a heartbeat sent at once, and is handed back if none comes
within the ack window (``schedd_worker.held_assignments``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable

import grpc
from google.protobuf.json_format import MessageToDict

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_core.backoff import Backoff
from schedd_core.clock import Clock, SystemClock
from schedd_core.permits import AttemptWindows, Permit
from schedd_exec.attempt_fence import AttemptFence
from schedd_exec.attempt_log import AttemptLogs, LogText
from schedd_exec.bundle_cache import BundleCache
from schedd_exec.executor import AttemptExecutor
from schedd_exec.outcome import Outcome
from schedd_rpc import convert, stream_batches
from schedd_rpc.tls import token_metadata
from schedd_worker.attempt_spans import AttemptSpans
from schedd_worker.bundle_fetch import RegistryBundleFetcher
from schedd_worker.config import WorkerConfig
from schedd_worker.heartbeats import HeartbeatCadence
from schedd_worker.held_assignments import HeldAssignments
from schedd_worker.metrics import WorkerMetrics
from schedd_worker.registry_channel import registry_channel
from schedd_worker.result_linger import ResultLinger
from schedd_worker.result_messages import reportable_text, results_message, task_result
from schedd_worker.secret_reads import SecretReads

log = logging.getLogger(__name__)

#: Seconds to wait for the registry to acknowledge the last results before exiting.
#: Longest one step of shutting down (closing the stream, the executor) may take.
SHUTDOWN_STEP_SECONDS = 5.0
FINAL_ACK_WAIT = 10.0


async def bounded(step: Awaitable[object], what: str, seconds: float = SHUTDOWN_STEP_SECONDS) -> None:
    """Wait for one step of shutting down, at most ``seconds``: a step that hangs is logged and left,
    so a drained or stopped worker always exits (its task processes die with it)."""
    try:
        await asyncio.wait_for(step, seconds)
    except TimeoutError:
        log.warning("%s did not stop within %.0fs; exiting without it", what, seconds)


class WorkerAgent:
    def __init__(self, config: WorkerConfig, *, clock: Clock | None = None) -> None:
        """``clock``: where every time the agent reads comes from (its permit's and fence's, its log
        stamps, its results' times; the system's when None)."""
        self._config = config
        self._clock = clock or SystemClock()
        fetcher = RegistryBundleFetcher(config.registries, config.token, self._channel)
        self.bundles = BundleCache.for_owner(
            config.worker_id,
            fetcher.fetch,
            directory=config.bundle_cache_dir,
            max_bytes=config.bundle_cache_bytes,
            traversable_by_others=bool(config.task_environment and config.task_environment.user),
        )
        self.executor = AttemptExecutor(
            python_workers=config.python_workers or config.capacity,
            python_warm=config.python_warm,
            kill_grace=config.kill_grace,
            on_output=self._output,
            on_done=self._done,
            task_database_url=config.task_database_url,
            bundles=self.bundles,
            environment=config.task_environment,
            secrets=SecretReads(
                config.registries, config.token, config.worker_id, self._channel, lambda: self._logs
            ).answer,
        )
        self.permit = Permit(AttemptWindows(), config.kill_grace, self._clock)
        self.fence = AttemptFence(
            self.permit,
            self.executor.reaper,
            self._clock,
            running=lambda: len(self.executor.running),
            stop_all=self.abandon_all,
        )
        self._held = HeldAssignments(lambda a, why: self._done(a, self._abandoned(why)))
        self._cadence = HeartbeatCadence(self._busy, lambda: self.permit.windows)
        self._sequence = itertools.count(1)
        self._hello_sequence = 0
        #: Assignments received on the current stream.
        self._received = 0
        self._unacked: dict[str, worker_pb2.TaskResult] = {}
        self._acked = asyncio.Event()
        self._logs = AttemptLogs(clock=self._clock.now)
        self._outgoing: asyncio.Queue[worker_pb2.WorkerMessage] | None = None
        self._linger = ResultLinger(config.result_linger)
        self._welcomed = asyncio.Event()
        self.draining = False
        self._drain_requested = asyncio.Event()
        self._drain_grace = config.drain_grace
        self.completed = 0
        self._callbacks: set[asyncio.Task[None]] = set()
        self.metrics = WorkerMetrics(config.capacity, lambda: self.executor.running_count)
        self._spans = AttemptSpans()

    # -- lifecycle ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until drained: ``stop`` (SIGTERM) or a Drain message starts the drain."""
        await self.executor.start()
        fencing = asyncio.create_task(self.fence.run(), name="attempt-fence")
        connection = asyncio.create_task(self._connect_forever(), name="registry-connection")
        drain_signal = asyncio.ensure_future(stop.wait())
        drain_request = asyncio.ensure_future(self._drain_requested.wait())
        await asyncio.wait({drain_signal, drain_request, connection}, return_when=asyncio.FIRST_COMPLETED)
        drain_signal.cancel()
        drain_request.cancel()
        await self.drain(self._drain_grace)
        for task in (connection, fencing):
            task.cancel()
        await bounded(asyncio.gather(connection, fencing, return_exceptions=True), "the registry stream")
        await bounded(self.executor.close(), "the executor")
        self.bundles.close()

    async def drain(self, grace: float) -> None:
        """Take no new work; let running attempts finish within ``grace``, hand back the rest, and
        wait (bounded) until the registry acknowledged every result."""
        self.draining = True
        self._send(worker_pb2.WorkerMessage(draining=worker_pb2.Draining()))
        self._held.hand_back_all("the worker is draining")
        running = len(self.executor.running)
        log.info("draining: %d attempts running, grace %.1fs", running, grace)
        if not await self.executor.wait_idle(grace):
            await self.executor.cancel_all("drain grace passed; handing the attempts back")
        deadline = asyncio.get_running_loop().time() + FINAL_ACK_WAIT
        while self._unacked and asyncio.get_running_loop().time() < deadline:
            self._acked.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._acked.wait(), deadline - asyncio.get_running_loop().time())
        if self._unacked:
            log.warning(
                "exiting with %d results unacknowledged; they will be failed over", len(self._unacked)
            )

    def abandon_all(self, reason: str) -> None:
        """Stop every running attempt now; they are reported abandoned and run again elsewhere."""
        for assignment in self.executor.running:
            log.warning("abandoning attempt %s: %s", assignment.attempt.attempt_id, reason)
            self.executor.cancel(assignment.attempt.attempt_id)

    # -- the stream -----------------------------------------------------------------------------

    def _channel(self, registry: str) -> grpc.aio.Channel:
        return registry_channel(registry, self._config.tls)

    async def _connect_forever(self) -> None:
        backoff = Backoff(0.1, 5.0, jitter=0.5)
        for registry in itertools.cycle(self._config.registries):
            try:
                async with self._channel(registry) as channel:
                    await self._session(worker_pb2_grpc.WorkerRegistryStub(channel))
                    backoff.reset()
            except grpc.aio.AioRpcError as exc:
                log.warning(
                    "stream to registry %s broke: %s %s; reconnecting in %.1fs",
                    registry,
                    exc.code().name,
                    exc.details(),
                    backoff.delay,
                )
            finally:
                self._outgoing = None
            await asyncio.sleep(backoff.take())

    async def _session(self, stub: worker_pb2_grpc.WorkerRegistryStub) -> None:
        outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
        cfg = self._config
        running = [a.attempt for a in self.executor.running] + [r.attempt for r in self._unacked.values()]
        self._hello_sequence = next(self._sequence)
        self.permit.sent(self._hello_sequence)
        outgoing.put_nowait(
            worker_pb2.WorkerMessage(
                hello=worker_pb2.WorkerHello(
                    worker_id=cfg.worker_id,
                    hostname=cfg.hostname,
                    queues=list(cfg.queues),
                    capacity=cfg.capacity,
                    code_version=cfg.code_version,
                    incarnation=cfg.incarnation,
                    running=running,
                    kill_grace=convert.duration(cfg.kill_grace),
                )
            )
        )
        for result in self._unacked.values():
            outgoing.put_nowait(worker_pb2.WorkerMessage(result=result))
        if self.draining:
            outgoing.put_nowait(worker_pb2.WorkerMessage(draining=worker_pb2.Draining()))
        else:
            free = cfg.capacity - len(self.executor.running)
            if free > 0:
                outgoing.put_nowait(worker_pb2.WorkerMessage(credit=worker_pb2.Credit(slots=free)))
        self._outgoing, self._received = outgoing, 0
        self._welcomed.clear()
        session_over = asyncio.Event()  # set when the stream ended: ``requests`` returns

        async def requests() -> AsyncIterator[worker_pb2.WorkerMessage]:
            while True:
                # results ready together (a fan-out's tasks ending at once) go as one message
                first = await outgoing.get()
                if first.WhichOneof("message") == "result":  # results ending a little apart go together
                    await self._linger.wait(others_running=self.executor.running_count > 0)
                if session_over.is_set():
                    return  # so gRPC's task writing the stream ends (cancelling a broken call does not)
                for message in stream_batches.drain(first, outgoing, "result", results_message):
                    yield message

        call = stub.Connect(requests(), metadata=token_metadata(cfg.token))
        heartbeats = asyncio.create_task(self._heartbeats(), name="heartbeats")
        try:
            async for message in call:
                self._handle(message)
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                "the registry closed the stream",
            )
        finally:
            heartbeats.cancel()
            session_over.set()
            outgoing.put_nowait(worker_pb2.WorkerMessage())  # wakes ``requests`` to see it
            call.cancel()
            self._held.hand_back_all("the stream to the registry ended")

    async def _heartbeats(self) -> None:
        """Heartbeat from the registry's welcome on, as often as ``HeartbeatCadence`` says: the
        registry learns the worker's load and that it is alive, and its acknowledgements keep the
        worker's permit to run its attempts."""
        await self._welcomed.wait()
        await self._cadence.run(self._heartbeat)

    def _heartbeat(self) -> None:
        sequence = next(self._sequence)
        attempts = [a.attempt for a in self.executor.running] + [r.attempt for r in self._unacked.values()]
        self.permit.sent(sequence)
        self._send(
            worker_pb2.WorkerMessage(
                heartbeat=worker_pb2.TaskHeartbeat(
                    attempts=attempts + self._held.refs(),
                    sequence=sequence,
                    assignments_received=self._received,
                )
            )
        )

    def _busy(self) -> bool:
        """Whether the worker holds an attempt: running, held, or with its result unacknowledged."""
        return bool(self.executor.running or self._unacked or self._held)

    def _send(self, message: worker_pb2.WorkerMessage) -> None:
        if self._outgoing is not None:
            self._outgoing.put_nowait(message)

    def _handle(self, message: worker_pb2.RegistryMessage) -> None:
        kind = message.WhichOneof("message")
        if kind in ("assignment", "assignments"):
            batch = [message.assignment] if kind == "assignment" else list(message.assignments.assignments)
            self._received += len(batch)
            for assignment in batch:
                if self.draining:
                    # Credits raced with the drain: hand it straight back.
                    self._done(assignment, self._abandoned("the worker is draining"))
                elif self._held or not self.permit.may_start():
                    # held until a heartbeat sent now is acknowledged, handed back after the ack window
                    self._held.hold(assignment, self.permit.windows.ack_window)
                    self._cadence.now()
                else:
                    self._start(assignment)
        elif kind == "heartbeat_ack":
            self.permit.acknowledged(message.heartbeat_ack.sequence)
            self.fence.poke()
            if self._held and self.permit.may_start():
                for assignment in self._held.release():
                    self._start(assignment)
        elif kind in ("ack", "acks"):
            for ack in [message.ack] if kind == "ack" else message.acks.acks:
                self._unacked.pop(ack.attempt.attempt_id, None)
                if ack.code != grpc.StatusCode.OK.value[0]:
                    log.warning(
                        "registry rejected the result of attempt %s: %s", ack.attempt.attempt_id, ack.message
                    )
            self._acked.set()
        elif kind == "cancel":
            for attempt in message.cancel.attempts:
                if self.executor.cancel(attempt.attempt_id):
                    log.warning("cancelled attempt %s: %s", attempt.attempt_id, message.cancel.reason)
                elif (held := self._held.take(attempt.attempt_id)) is not None:
                    self._done(held, self._abandoned(f"cancelled before it started: {message.cancel.reason}"))
        elif kind == "run_callback":
            task = asyncio.create_task(self._callback(message.run_callback))
            self._callbacks.add(task)
            task.add_done_callback(self._callbacks.discard)
        elif kind == "drain":
            self._drain_grace = message.drain.grace.ToTimedelta().total_seconds()
            self._drain_requested.set()
        elif kind == "welcome":
            self._welcome(message.welcome)

    def _start(self, assignment: worker_pb2.Assignment) -> None:
        with self._spans.starting(assignment):
            self.executor.submit(assignment)
        self._cadence.became_busy()

    def _welcome(self, welcome: worker_pb2.Welcome) -> None:
        interval = welcome.heartbeat_interval.ToTimedelta().total_seconds()
        windows = AttemptWindows(
            heartbeat_interval=interval,
            ack_window=welcome.ack_window.ToTimedelta().total_seconds(),
            silence_limit=welcome.silence_limit.ToTimedelta().total_seconds(),
            # a registry that grants no idle interval expects a heartbeat every interval
            idle_heartbeat_interval=welcome.idle_heartbeat_interval.ToTimedelta().total_seconds() or interval,
        )
        self.permit.granted(windows)
        self.permit.acknowledged(self._hello_sequence)
        self.fence.poke()
        self._welcomed.set()
        log.info("connected to registry as %s", welcome.worker_id)

    async def _callback(self, request: worker_pb2.RunCallback) -> None:
        try:
            ok, error = await self.executor.run_callback(request.python.target, MessageToDict(request.event))
        except Exception as exc:
            ok, error = False, str(exc)
        self._send(
            worker_pb2.WorkerMessage(
                callback_done=worker_pb2.CallbackDone(callback_id=request.callback_id, ok=ok, error=error)
            )
        )

    # -- executor callbacks ---------------------------------------------------------------------

    def _output(self, assignment: worker_pb2.Assignment, data: bytes) -> None:
        self._send_log(assignment, self._logs.output(assignment.attempt.attempt_id, data))

    def _send_log(self, assignment: worker_pb2.Assignment, pieces: list[LogText]) -> None:
        for piece in pieces:
            self._send(
                worker_pb2.WorkerMessage(
                    log=worker_pb2.LogChunk(attempt=assignment.attempt, offset=piece.offset, data=piece.text)
                )
            )

    def _abandoned(self, reason: str) -> Outcome:
        """An assignment handed back unstarted, ended now."""
        now = self._clock.now()
        return Outcome(False, -1, reason, now, now, abandoned=True)

    def _done(self, assignment: worker_pb2.Assignment, outcome: Outcome) -> None:
        attempt = assignment.attempt
        error = self._logs.masked(attempt.attempt_id, reportable_text(outcome.error))
        # How it failed ends the attempt's log, sent ahead of the result.
        self._send_log(assignment, self._logs.ended(assignment, outcome))
        result = task_result(assignment, outcome, error)
        self._unacked[attempt.attempt_id] = result
        message = worker_pb2.WorkerMessage(result=result)  # a copy: what is kept to resend has no credit
        if not self.draining:
            message.result.credit = 1  # the slot it held goes with the result
        self._send(message)
        if assignment.hands_off:  # its successor may start on this worker once the result is applied
            self._linger.cut_short()
        self.completed += 1
        self.metrics.ended(outcome)
        self._spans.ended(assignment, outcome)
