"""What the registry refuses to store or to send: results that jsonb cannot hold or that are too big
(the attempt fails with the reason instead of the whole batch of results), and assignment messages
beyond what a worker accepts."""

from __future__ import annotations

import json

import pytest

from schedd.v1 import worker_pb2
from schedd_core.limits import MAX_RESULT_BYTES
from schedd_registry.dispatcher import split_by_size
from schedd_registry.results import result_problem


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ("", ""),
        ('{"a": [1, 2.5, null, "x"]}', ""),
        ("NaN", "not valid JSON"),
        ('{"a": Infinity}', "not valid JSON"),
        ('{"a": "\\u0000"}', "NUL character"),
        ("{not json", "not valid JSON"),
        (json.dumps("x" * MAX_RESULT_BYTES), "the limit is"),
    ],
)
def testresult_problem(result: str, problem: str) -> None:
    found = result_problem(result)
    assert (problem in found) if problem else found == ""


def _assignment(size: int) -> worker_pb2.Assignment:
    return worker_pb2.Assignment(task_id="t", upstream_results_json="x" * size)


def test_assignments_are_split_into_messages_a_worker_accepts() -> None:
    batch = [_assignment(600_000) for _ in range(10)]
    parts = split_by_size(batch, 2 * 1024 * 1024)
    assert [len(p) for p in parts] == [3, 3, 3, 1]
    assert all(sum(a.ByteSize() for a in p) <= 2 * 1024 * 1024 for p in parts)
    assert [a for p in parts for a in p] == batch
    assert split_by_size([_assignment(3_000_000)], 1_000_000) == [[_assignment(3_000_000)]]
