"""A stand-in registry for measuring one worker alone (``tests.benchmarks.worker_alone``).

``python -m tests.benchmarks.standin_registry --port P --hold-ms H`` serves the worker stream and
does nothing else a registry does: it welcomes a worker, acknowledges its heartbeats and results,
and for every slot the worker frees (its hello's credit, each result's) sends a no-op Python
assignment, ``H`` milliseconds later (0: at once). No database, no claims, no authentication: what
the worker spends is all there is to measure. It prints ``ready`` once it listens, then ``done N``
(results received so far) every ``--every`` seconds, on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_rpc import convert
from tests.benchmarks.common import NOOP

#: The windows the stand-in grants, in seconds: heartbeats every second while busy, nothing is
#: ever fenced out within a measurement.
HEARTBEAT, ACK_WINDOW, SILENCE_LIMIT, IDLE_HEARTBEAT = 1.0, 10.0, 30.0, 10.0


class StandInRegistry(worker_pb2_grpc.WorkerRegistryServicer):
    def __init__(self, hold: float) -> None:
        self._hold = hold
        self._ids = itertools.count(1)
        self.done = 0

    def _assignment(self) -> worker_pb2.Assignment:
        ti_id = next(self._ids)
        attempt_id = uuid.uuid4().hex
        now = datetime.now(UTC)
        task_id = f"t{ti_id}"
        key = f"standin/run/{task_id}"
        env = {
            "SCHEDD_DAG_ID": "standin",
            "SCHEDD_RUN_ID": "run",
            "SCHEDD_RUN_TYPE": "manual",
            "SCHEDD_TASK_ID": task_id,
            "SCHEDD_TRY_NUMBER": "1",
            "SCHEDD_ATTEMPT_ID": attempt_id,
            "SCHEDD_LOGICAL_DATE": now.isoformat(),
            "SCHEDD_IDEMPOTENCY_KEY": key,
        }
        assignment = worker_pb2.Assignment(
            attempt=worker_pb2.AttemptRef(task_instance_id=ti_id, try_number=1, attempt_id=attempt_id),
            dag_id="standin",
            run_id="run",
            task_id=task_id,
            logical_date=convert.ts(now),
            env=env,
            idempotency_key=key,
            params=convert.struct({}),
            queued_time=convert.ts(now),
        )
        assignment.python.target = NOOP
        return assignment

    def _assign(self, out: asyncio.Queue[worker_pb2.RegistryMessage | None], slots: int) -> None:
        if slots > 0:
            batch = worker_pb2.AssignmentBatch(assignments=[self._assignment() for _ in range(slots)])
            out.put_nowait(worker_pb2.RegistryMessage(assignments=batch))

    def _grant(self, out: asyncio.Queue[worker_pb2.RegistryMessage | None], slots: int) -> None:
        if self._hold > 0:
            asyncio.get_running_loop().call_later(self._hold, self._assign, out, slots)
        else:
            self._assign(out, slots)

    def _handle(self, message: worker_pb2.WorkerMessage, out: asyncio.Queue[Any]) -> None:
        kind = message.WhichOneof("message")
        if kind == "hello":
            welcome = worker_pb2.Welcome(
                worker_id=message.hello.worker_id,
                heartbeat_interval=convert.duration(HEARTBEAT),
                ack_window=convert.duration(ACK_WINDOW),
                silence_limit=convert.duration(SILENCE_LIMIT),
                idle_heartbeat_interval=convert.duration(IDLE_HEARTBEAT),
            )
            out.put_nowait(worker_pb2.RegistryMessage(welcome=welcome))
        elif kind == "credit":
            self._grant(out, message.credit.slots)
        elif kind == "heartbeat":
            ack = worker_pb2.HeartbeatAck(sequence=message.heartbeat.sequence)
            out.put_nowait(worker_pb2.RegistryMessage(heartbeat_ack=ack))
        elif kind in ("result", "results"):
            results = [message.result] if kind == "result" else list(message.results.results)
            acks = [worker_pb2.ReportAck(attempt=r.attempt, code=0) for r in results]
            out.put_nowait(worker_pb2.RegistryMessage(acks=worker_pb2.ReportAcks(acks=acks)))
            self.done += len(results)
            self._grant(out, sum(r.credit for r in results))

    async def Connect(
        self, request_iterator: AsyncIterator[worker_pb2.WorkerMessage], context: Any
    ) -> AsyncIterator[worker_pb2.RegistryMessage]:
        out: asyncio.Queue[worker_pb2.RegistryMessage | None] = asyncio.Queue()

        async def read() -> None:
            async for message in request_iterator:
                self._handle(message, out)
            out.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (message := await out.get()) is not None:
                yield message
        finally:
            reader.cancel()

    async def FetchBundle(
        self, request: worker_pb2.FetchBundleRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_pb2.BundleChunk]:
        """No chunks and UNIMPLEMENTED: the stand-in keeps no code bundles (its assignments pin none)."""
        context.set_code(grpc.StatusCode.UNIMPLEMENTED)
        context.set_details("the stand-in registry keeps no code bundles")
        chunks: list[worker_pb2.BundleChunk] = []
        for chunk in chunks:
            yield chunk

    async def Enroll(
        self, request: worker_pb2.EnrollRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.EnrollResponse:
        """UNIMPLEMENTED: the stand-in enrolls no one (its worker starts with a token it never checks)."""
        context.set_code(grpc.StatusCode.UNIMPLEMENTED)
        context.set_details("the stand-in registry enrolls no one")
        return worker_pb2.EnrollResponse()


async def serve(port: int, hold: float, every: float) -> None:
    registry = StandInRegistry(hold)
    server = grpc.aio.server()
    worker_pb2_grpc.add_WorkerRegistryServicer_to_server(registry, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    while True:
        await asyncio.sleep(every)
        print("done", registry.done, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="tests.benchmarks.standin_registry")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hold-ms", type=float, default=0.0, help="ms before a freed slot is filled")
    parser.add_argument("--every", type=float, default=0.25, help="seconds between progress lines")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.hold_ms / 1000, args.every))


if __name__ == "__main__":
    main()
