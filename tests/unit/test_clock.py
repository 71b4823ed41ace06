"""Clocks: the fake one moves only when told to; the system one is UTC and monotonic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedd_core.clock import Clock, FakeClock, SystemClock


def test_fake_clock_starts_at_a_fixed_utc_time() -> None:
    c = FakeClock()
    assert c.now() == datetime(2026, 1, 1, tzinfo=UTC)
    assert c.now().utcoffset() == timedelta(0)


def test_fake_clock_stands_still() -> None:
    c = FakeClock()
    first = (c.now(), c.monotonic())
    assert (c.now(), c.monotonic()) == first


def test_fake_clock_advances_both_clocks() -> None:
    start = datetime(2030, 5, 1, 12, tzinfo=UTC)
    c = FakeClock(start)
    mono = c.monotonic()
    c.advance(1.5)
    c.advance(60)
    assert c.now() == start + timedelta(seconds=61.5)
    assert c.monotonic() == mono + 61.5


def test_clocks_satisfy_the_protocol() -> None:
    clocks: list[Clock] = [FakeClock(), SystemClock()]
    for c in clocks:
        assert c.now().tzinfo is not None
        assert isinstance(c.monotonic(), float)


def test_system_clock_is_utc_and_monotonic() -> None:
    c = SystemClock()
    before = datetime.now(UTC)
    now = c.now()
    assert now.utcoffset() == timedelta(0)
    assert abs(now - before) < timedelta(seconds=5)
    a = c.monotonic()
    assert c.monotonic() >= a
