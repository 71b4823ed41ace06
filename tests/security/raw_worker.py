"""A worker stream over raw gRPC, for tests that speak the worker protocol as an attacker would:
any hello, any message, no worker process behind it."""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc

from schedd.v1 import worker_pb2

#: Bound (seconds) on waiting for one answer of the registry.
RPC_TIMEOUT = 30.0
#: Bound (seconds) on the whole stream.
STREAM_TIMEOUT = 120.0


class RawWorker:
    """One worker stream over raw gRPC: messages go out as they are sent, answers are queued."""

    def __init__(self, registry: str, token: str | None, worker_id: str, **hello: Any) -> None:
        self._channel = grpc.insecure_channel(registry)
        self._outgoing: queue.Queue[worker_pb2.WorkerMessage | None] = queue.Queue()
        self.answers: queue.Queue[worker_pb2.RegistryMessage | grpc.RpcError | None] = queue.Queue()
        first = worker_pb2.WorkerMessage(
            hello=worker_pb2.WorkerHello(
                worker_id=worker_id,
                capacity=hello.pop("capacity", 1),
                incarnation=hello.pop("incarnation", secrets.token_hex(8)),
                **hello,
            )
        )
        first.hello.kill_grace.FromSeconds(1)
        self._outgoing.put(first)
        stream = self._channel.stream_stream(
            "/schedd.v1.WorkerRegistry/Connect",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=worker_pb2.RegistryMessage.FromString,
        )
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._call = stream(self._requests(), timeout=STREAM_TIMEOUT, metadata=metadata)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _requests(self) -> Iterator[worker_pb2.WorkerMessage]:
        while (message := self._outgoing.get()) is not None:
            yield message

    def _read(self) -> None:
        try:
            for message in self._call:
                self.answers.put(message)
            self.answers.put(None)
        except grpc.RpcError as exc:
            self.answers.put(exc)

    def send(self, **message: Any) -> None:
        self._outgoing.put(worker_pb2.WorkerMessage(**message))

    def next(self, kind: str, timeout: float = RPC_TIMEOUT) -> Any:
        """The next answer of ``kind`` (others are skipped); raises on the stream's end."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.answers.get(timeout=max(0.01, deadline - time.monotonic()))
            if answer is None or isinstance(answer, grpc.RpcError):
                raise AssertionError(f"the stream ended while waiting for {kind}: {answer}")
            if answer.WhichOneof("message") == kind:
                return getattr(answer, kind)

    def outcome(self, timeout: float = RPC_TIMEOUT) -> grpc.RpcError | None:
        """How the stream ended (None: closed with OK), skipping every message before."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.answers.get(timeout=max(0.01, deadline - time.monotonic()))
            if answer is None or isinstance(answer, grpc.RpcError):
                return answer

    def finish(self, timeout: float = RPC_TIMEOUT) -> grpc.RpcError | None:
        """Half-close the stream and return how it ended: the registry ends it once it handled
        every message sent."""
        self._outgoing.put(None)
        return self.outcome(timeout)

    def close(self) -> None:
        self._outgoing.put(None)
        self._call.cancel()
        self._channel.close()
