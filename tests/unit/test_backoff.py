"""The retry loops' backoff: the schedule, one loop's waits with jitter, and retry() on an injected
sleep (no real time passes)."""

from __future__ import annotations

import asyncio

import pytest

from schedd_core.backoff import Backoff, backoff_delay, retry


def test_the_schedule_doubles_from_the_first_wait_up_to_the_cap() -> None:
    waits = [backoff_delay(n, first=0.1, cap=5.0) for n in range(1, 10)]
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0])
    assert backoff_delay(10_000, first=0.05, cap=2.0) == 2.0  # no overflow after days of failures
    with pytest.raises(ValueError, match="at least 1"):
        backoff_delay(0, first=0.1, cap=5.0)


def test_a_loop_waits_longer_after_each_failure_and_starts_over_after_a_success() -> None:
    backoff = Backoff(0.05, 2.0)
    assert [backoff.take() for _ in range(7)] == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0])
    backoff.reset()
    assert backoff.delay == 0.05 and backoff.take() == 0.05


@pytest.mark.parametrize(("draw", "scale"), [(0.0, 0.5), (0.5, 1.0), (0.999, 1.499)])
def test_jitter_spreads_each_wait_around_the_schedule(draw: float, scale: float) -> None:
    backoff = Backoff(0.1, 5.0, jitter=0.5, draw=lambda: draw)
    assert backoff.delay == 0.1  # what a log line names: the wait before jitter
    assert backoff.take() == pytest.approx(0.1 * scale)
    assert backoff.take() == pytest.approx(0.2 * scale)


class _Flaky:
    """Fails ``failures`` times, then returns "done"."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.left = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.error
        return "done"


def test_retry_sleeps_the_schedule_between_tries_until_the_operation_succeeds() -> None:
    slept: list[float] = []
    seen: list[tuple[str, float]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    operation = _Flaky(4, OSError("down"))
    result = asyncio.run(
        retry(
            operation,
            Backoff(0.5, 2.0),
            on_failure=lambda exc, wait: seen.append((str(exc), wait)),
            sleep=sleep,
        )
    )
    assert result == "done" and operation.calls == 5
    assert slept == [0.5, 1.0, 2.0, 2.0]
    assert seen == [("down", 0.5), ("down", 1.0), ("down", 2.0), ("down", 2.0)]


def test_retry_raises_at_once_what_it_must_not_retry() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    operation = _Flaky(3, ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        asyncio.run(
            retry(operation, Backoff(0.1, 1.0), retry_on=lambda exc: isinstance(exc, OSError), sleep=sleep)
        )
    assert operation.calls == 1 and slept == []
