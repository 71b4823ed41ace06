"""Attempt fencing and lease deadlines on a fake clock: when a worker must stop, and why the leader
never fails an attempt over before that (``schedd_core.permits``, ``schedd_coord.lease``)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from schedd_coord.lease import LeaseDeadline, LeaseTiming
from schedd_core.clock import FakeClock
from schedd_core.permits import FENCE_MARGIN, AttemptWindows, Permit

WINDOWS = AttemptWindows(heartbeat_interval=1.0, ack_window=3.0, silence_limit=30.0)


def permit(clock: FakeClock, kill_grace: float = 1.0, windows: AttemptWindows = WINDOWS) -> Permit:
    return Permit(windows, kill_grace, clock)


def test_nothing_may_run_before_the_registry_acknowledged_anything() -> None:
    clock = FakeClock()
    p = permit(clock)
    assert not p.may_run()
    assert not p.may_start()


def test_an_acknowledged_heartbeat_permits_the_ack_window_from_when_it_was_sent() -> None:
    clock = FakeClock()
    p = permit(clock)
    p.sent(1)
    clock.advance(0.4)  # the ack comes later; the window counts from the send
    p.acknowledged(1)
    assert p.until() == pytest.approx(clock.monotonic() - 0.4 + WINDOWS.ack_window)
    clock.advance(2.5)
    assert p.may_run() and p.may_start()
    clock.advance(0.2)
    assert not p.may_run()


def test_an_unacknowledged_heartbeat_extends_nothing() -> None:
    clock = FakeClock()
    p = permit(clock)
    p.sent(1)
    p.acknowledged(1)
    until = p.until()
    clock.advance(1)
    p.sent(2)  # never acknowledged (the registry could not store it)
    assert p.until() == until


def test_a_late_ack_of_an_older_heartbeat_does_not_move_the_window_back() -> None:
    clock = FakeClock()
    p = permit(clock)
    p.sent(1)
    clock.advance(1)
    p.sent(2)
    p.acknowledged(2)
    until = p.until()
    p.acknowledged(1)
    assert p.until() == until


def test_a_lease_keeps_attempts_running_but_starts_nothing_new() -> None:
    clock = FakeClock()
    p = permit(clock)
    p.sent(1)
    p.acknowledged(1)
    lease_until = [clock.monotonic() + 10]
    p.lease_held(lambda: lease_until[0])
    clock.advance(5)  # the registry went quiet; the lease is renewed
    lease_until[0] = clock.monotonic() + 3
    assert p.may_run()
    assert not p.may_start(), "a new attempt needs the registry to have heard the worker lately"
    p.lease_lost()
    assert not p.may_run()


def test_even_a_live_lease_stops_at_the_silence_cap() -> None:
    clock = FakeClock()
    p = permit(clock, kill_grace=1.0)
    p.sent(1)
    p.acknowledged(1)
    p.lease_held(lambda: clock.monotonic() + 3)  # always valid
    cap = WINDOWS.silence_limit - 1.0 - FENCE_MARGIN
    clock.advance(cap - 0.01)
    assert p.may_run()
    clock.advance(0.02)
    assert not p.may_run()


def test_windows_are_validated() -> None:
    with pytest.raises(ValueError, match="longer than the heartbeat interval"):
        AttemptWindows(heartbeat_interval=2, ack_window=2, silence_limit=30)
    with pytest.raises(ValueError, match="silence limit"):
        AttemptWindows(heartbeat_interval=1, ack_window=3, silence_limit=3.4)
    with pytest.raises(ValueError, match="kill grace"):
        WINDOWS.check_kill_grace(30 - 3 - FENCE_MARGIN)
    with pytest.raises(ValueError, match="kill grace"):
        permit(FakeClock(), kill_grace=27)
    assert AttemptWindows.for_silence_limit(3).ack_window + FENCE_MARGIN < 3


@given(
    hb_interval=st.floats(0.1, 2),
    ack_factor=st.floats(1.5, 4),
    kill_grace=st.floats(0, 2),
    silence_extra=st.floats(0.1, 30),
    ack_delay=st.floats(0, 0.5),
    frozen_after=st.floats(0, 60),
    lease_valid_for=st.one_of(st.none(), st.floats(0, 60)),
)
def test_the_leader_never_fails_over_before_the_worker_stopped(
    hb_interval: float,
    ack_factor: float,
    kill_grace: float,
    silence_extra: float,
    ack_delay: float,
    frozen_after: float,
    lease_valid_for: float | None,
) -> None:
    """The worker heartbeats and is acknowledged, then goes silent (frozen, cut off). The leader's
    rule (``FAIL_OVER_LOST_ATTEMPTS``) fails the attempt over only once the worker's permit plus its
    kill grace has passed, with or without a lease."""
    ack = hb_interval * ack_factor
    windows = AttemptWindows(hb_interval, ack, ack + kill_grace + FENCE_MARGIN + silence_extra)
    clock = FakeClock()
    p = Permit(windows, kill_grace, clock)
    lease = None if lease_valid_for is None else clock.monotonic() + lease_valid_for
    if lease is not None:
        p.lease_held(lambda: lease)
    sequence = 0
    stored_at = float("-inf")
    started = clock.monotonic()
    while True:
        sequence += 1
        p.sent(sequence)
        clock.advance(ack_delay)
        stored_at = clock.monotonic()  # the registry stores it, then acknowledges
        p.acknowledged(sequence)
        clock.advance(hb_interval)
        if clock.monotonic() - started >= frozen_after:
            break
    killed_by = p.until() + kill_grace
    # The leader: unheard for longer than the silence limit (lease or not), or than the fence window
    # once etcd expired the lease, which it does no sooner than the lease's margin after its deadline.
    lost_by_silence = stored_at + windows.silence_limit
    if lease is None:
        lost_by_window = stored_at + windows.fence_window(kill_grace)
    else:
        etcd_expiry = lease + kill_grace + 1e-6  # a margin just above the kill grace, the least allowed
        lost_by_window = max(etcd_expiry, stored_at + windows.fence_window(kill_grace))
    assert killed_by < min(lost_by_silence, lost_by_window) + 1e-9


def test_lease_deadline_counts_from_the_newest_acknowledged_send() -> None:
    clock = FakeClock()
    timing = LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.4)
    deadline = LeaseDeadline(timing, clock)
    assert not deadline.valid
    deadline.acknowledged(clock.monotonic())
    first = clock.monotonic()
    clock.advance(1.0)
    deadline.acknowledged(first - 0.5)  # a late answer to an older keep-alive changes nothing
    assert deadline.until == pytest.approx(first + 1.4)
    clock.advance(0.39)
    assert deadline.valid
    clock.advance(0.02)
    assert not deadline.valid
    deadline.acknowledged(clock.monotonic())
    assert deadline.valid
    deadline.gone()
    assert not deadline.valid and deadline.remaining() < 0


def test_lease_timing_states_the_clock_rate_it_tolerates() -> None:
    timing = LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.4)
    assert timing.margin == pytest.approx(0.6)
    assert timing.tolerated_clock_rate == pytest.approx(0.7)


def test_idle_heartbeats_default_to_ten_seconds_within_the_silence_limit() -> None:
    assert AttemptWindows().idle_heartbeat_interval == 10.0
    assert AttemptWindows(heartbeat_interval=1, ack_window=3, silence_limit=12).idle_heartbeat_interval == 4.0
    assert (
        AttemptWindows(heartbeat_interval=2, ack_window=3, silence_limit=3.75).idle_heartbeat_interval == 2.0
    )
    assert AttemptWindows.for_silence_limit(5.0).idle_heartbeat_interval == 5.0 / 3


def test_idle_heartbeats_must_fit_twice_in_the_silence_limit() -> None:
    with pytest.raises(ValueError, match="idle heartbeat interval"):
        AttemptWindows(heartbeat_interval=1, ack_window=3, silence_limit=30, idle_heartbeat_interval=16)
    with pytest.raises(ValueError, match="idle heartbeat interval"):
        AttemptWindows(heartbeat_interval=1, ack_window=3, silence_limit=30, idle_heartbeat_interval=0.5)


def test_an_idle_worker_is_taken_for_silent_only_after_its_idle_interval_too() -> None:
    windows = AttemptWindows(heartbeat_interval=1, ack_window=3, silence_limit=30, idle_heartbeat_interval=10)
    assert windows.silent_after(idle=False) == 3
    assert windows.silent_after(idle=True) == 13
