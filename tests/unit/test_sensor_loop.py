"""poke_until_done: poke and reschedule modes, the timeout from the first poke, soft_fail, verdicts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from schedd.v1 import resources_pb2 as pb, worker_pb2
from schedd_exec.outcome import Outcome
from schedd_exec.sensor_loop import BadVerdict, parse_verdict, poke_until_done

START = datetime(2026, 1, 1, tzinfo=UTC)


class FakeTime:
    """A clock that moves on by ``step`` at every poke."""

    def __init__(self, step: timedelta) -> None:
        self.now = START
        self.step = step
        self.slept: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


def pokes(
    clock: FakeTime, verdicts: list[object], *, ok: bool = True
) -> tuple[Callable[..., object], list[int]]:
    calls: list[int] = []

    async def poke(assignment: worker_pb2.Assignment) -> Outcome:
        calls.append(1)
        began = clock.now
        clock.now += clock.step
        value = verdicts[min(len(calls), len(verdicts)) - 1]
        return Outcome(
            ok, 0 if ok else 1, "" if ok else "boom", began, clock.now, result_json=json.dumps(value)
        )

    return poke, calls


def assignment(
    mode: int,
    *,
    interval: float = 1,
    timeout: float | None = 10,
    soft_fail: bool = False,
    first_poke: datetime | None = None,
) -> worker_pb2.Assignment:
    a = worker_pb2.Assignment(sensor=pb.SensorSpec(mode=mode, soft_fail=soft_fail))  # type: ignore[arg-type]
    a.sensor.poke_interval.FromTimedelta(timedelta(seconds=interval))
    if timeout is not None:
        a.sensor.timeout.FromTimedelta(timedelta(seconds=timeout))
    if first_poke is not None:
        a.first_poke_time.FromDatetime(first_poke)
    return a


def run(a: worker_pb2.Assignment, poke: Callable[..., object], clock: FakeTime) -> Outcome:
    return asyncio.run(poke_until_done(a, poke, now=clock, sleep=clock.sleep))  # type: ignore[arg-type]


def test_poke_mode_pokes_in_one_attempt_until_done_and_returns_the_value() -> None:
    clock = FakeTime(timedelta(seconds=1))
    poke, calls = pokes(
        clock, [False, {"is_done": False, "xcom_value": None}, {"is_done": True, "xcom_value": 7}]
    )
    out = run(assignment(pb.SENSOR_MODE_POKE), poke, clock)
    assert len(calls) == 3
    assert clock.slept == [1.0, 1.0], "poke_interval between pokes"
    assert out.succeeded and out.reschedule_at is None and not out.skipped
    assert out.result_json == "7"
    assert out.started_at == START


def test_reschedule_mode_ends_the_attempt_with_the_next_poke_time() -> None:
    clock = FakeTime(timedelta(seconds=1))
    poke, calls = pokes(clock, [False])
    out = run(assignment(pb.SENSOR_MODE_RESCHEDULE, interval=5), poke, clock)
    assert len(calls) == 1 and clock.slept == []
    assert out.succeeded
    assert out.reschedule_at == START + timedelta(seconds=6)


def test_the_next_poke_is_never_planned_past_the_timeout() -> None:
    clock = FakeTime(timedelta(seconds=1))
    poke, _ = pokes(clock, [False])
    out = run(assignment(pb.SENSOR_MODE_RESCHEDULE, interval=60, timeout=10), poke, clock)
    assert out.reschedule_at == START + timedelta(seconds=10)


def test_the_timeout_counts_from_the_first_poke_of_the_try_and_is_not_retried() -> None:
    clock = FakeTime(timedelta(seconds=1))
    poke, _ = pokes(clock, [False])
    out = run(
        assignment(pb.SENSOR_MODE_RESCHEDULE, timeout=10, first_poke=START - timedelta(seconds=9)),
        poke,
        clock,
    )
    assert not out.succeeded and out.no_retry and not out.skipped
    assert "timeout of 10s" in out.error


def test_soft_fail_skips_past_the_timeout() -> None:
    clock = FakeTime(timedelta(seconds=4))
    poke, calls = pokes(clock, [False])
    out = run(assignment(pb.SENSOR_MODE_POKE, interval=1, timeout=10, soft_fail=True), poke, clock)
    assert len(calls) == 3  # after 4s, 1s asleep, 4s, 1s asleep, 4s: past the timeout
    assert out.skipped and not out.succeeded


def test_no_timeout_means_no_limit() -> None:
    clock = FakeTime(timedelta(days=30))
    poke, _ = pokes(clock, [False])
    out = run(
        assignment(pb.SENSOR_MODE_RESCHEDULE, timeout=None, first_poke=START - timedelta(days=300)),
        poke,
        clock,
    )
    assert out.reschedule_at is not None


def test_a_poke_that_fails_fails_the_attempt_as_any_task() -> None:
    clock = FakeTime(timedelta(seconds=1))
    poke, _ = pokes(clock, [False], ok=False)
    out = run(assignment(pb.SENSOR_MODE_RESCHEDULE), poke, clock)
    assert not out.succeeded and out.error == "boom" and not out.no_retry


def test_a_verdict_that_is_not_a_bool_fails_with_what_it_was() -> None:
    clock = FakeTime(timedelta(seconds=1))
    poke, _ = pokes(clock, [[1, 2]])
    out = run(assignment(pb.SENSOR_MODE_POKE), poke, clock)
    assert not out.succeeded and "a sensor must return a bool" in out.error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", (True, "")),
        ("false", (False, "")),
        ("", (False, "")),
        ('{"is_done": true, "xcom_value": {"a": 1}}', (True, '{"a": 1}')),
        ('{"is_done": false}', (False, "")),
    ],
)
def test_parse_verdict(text: str, expected: tuple[bool, str]) -> None:
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("text", ["1", '"yes"', '{"is_done": 1}', '{"is_done": true, "other": 2}'])
def test_parse_verdict_rejects(text: str) -> None:
    with pytest.raises(BadVerdict):
        parse_verdict(text)
