"""schedd_rpc.stream_batches: messages ready together are merged by kind, none dropped or reordered."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from schedd.v1 import worker_pb2
from schedd_rpc.stream_batches import drain


def _result(attempt_id: str, error: str = "") -> worker_pb2.WorkerMessage:
    return worker_pb2.WorkerMessage(
        result=worker_pb2.TaskResult(attempt=worker_pb2.AttemptRef(attempt_id=attempt_id), error=error)
    )


def _merge(results: Sequence[worker_pb2.TaskResult]) -> worker_pb2.WorkerMessage:
    return worker_pb2.WorkerMessage(results=worker_pb2.TaskResults(results=results))


def _credit() -> worker_pb2.WorkerMessage:
    return worker_pb2.WorkerMessage(credit=worker_pb2.Credit(slots=1))


def _shape(messages: list[worker_pb2.WorkerMessage]) -> list[object]:
    shape: list[object] = []
    for m in messages:
        kind = m.WhichOneof("message")
        if kind == "result":
            shape.append(m.result.attempt.attempt_id)
        elif kind == "results":
            shape.append([r.attempt.attempt_id for r in m.results.results])
        else:
            shape.append(kind)
    return shape


def _drained(messages: list[worker_pb2.WorkerMessage], max_bytes: int = 64 * 1024) -> list[object]:
    queue: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
    for m in messages[1:]:
        queue.put_nowait(m)
    out = drain(messages[0], queue, "result", _merge, max_bytes=max_bytes)
    assert queue.empty()
    return _shape(out)


def test_adjacent_results_merge_and_everything_keeps_its_place() -> None:
    messages = [_result("a"), _result("b"), _credit(), _result("c"), _result("d"), _result("e")]
    assert _drained(messages) == [["a", "b"], "credit", ["c", "d", "e"]]


def test_a_lone_message_goes_as_it_is() -> None:
    assert _drained([_result("a")]) == ["a"]
    assert _drained([_credit(), _result("a"), _credit()]) == ["credit", "a", "credit"]


def test_a_merged_message_stays_within_its_size_and_a_big_one_goes_alone() -> None:
    big = _result("big", error="x" * 500)
    small = [_result(f"s{i}") for i in range(4)]
    limit = small[0].ByteSize() * 2
    assert _drained([*small, big, small[0]], max_bytes=limit) == [["s0", "s1"], ["s2", "s3"], "big", "s0"]
