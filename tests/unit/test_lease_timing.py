"""LeaseTiming: ttl > renew_deadline > retry_period > 0 and room for two keep-alives."""

from __future__ import annotations

import dataclasses

import pytest

from schedd_coord.lease import LeaseTiming


def test_defaults_are_valid() -> None:
    t = LeaseTiming()
    assert t.ttl > t.renew_deadline >= 2 * t.retry_period > 0


@pytest.mark.parametrize(
    ("ttl", "renew_deadline", "retry_period"),
    [
        (3, 2.0, 0.5),
        (10, 6.0, 1.0),
        (3, 2.0, 1.0),  # exactly two keep-alives fit
        (2, 1.9, 0.95),
        (1, 0.5, 0.1),
    ],
)
def test_valid_timings(ttl: int, renew_deadline: float, retry_period: float) -> None:
    t = LeaseTiming(ttl=ttl, renew_deadline=renew_deadline, retry_period=retry_period)
    assert (t.ttl, t.renew_deadline, t.retry_period) == (ttl, renew_deadline, retry_period)


@pytest.mark.parametrize(
    ("ttl", "renew_deadline", "retry_period"),
    [
        (3, 3.0, 0.5),  # ttl == renew_deadline: no safety margin
        (3, 4.0, 0.5),  # renew_deadline beyond ttl
        (3, 2.0, 2.0),  # renew_deadline == retry_period
        (3, 1.0, 2.0),  # retry_period beyond renew_deadline
        (3, 2.0, 0.0),  # no retry period
        (3, 2.0, -0.5),
        (0, -1.0, -2.0),
        (-1, -2.0, -3.0),
    ],
)
def test_ordering_is_enforced(ttl: int, renew_deadline: float, retry_period: float) -> None:
    with pytest.raises(ValueError, match=r"ttl > renew_deadline > retry_period > 0") as info:
        LeaseTiming(ttl=ttl, renew_deadline=renew_deadline, retry_period=retry_period)
    message = str(info.value)
    assert f"ttl={ttl}" in message
    assert f"renew_deadline={renew_deadline}" in message
    assert f"retry_period={retry_period}" in message


@pytest.mark.parametrize(("renew_deadline", "retry_period"), [(2.0, 1.5), (1.9, 1.0), (2.0, 1.0001)])
def test_renew_deadline_must_allow_two_keep_alives(renew_deadline: float, retry_period: float) -> None:
    with pytest.raises(ValueError, match=r"at least two keep-alives") as info:
        LeaseTiming(ttl=3, renew_deadline=renew_deadline, retry_period=retry_period)
    assert str(renew_deadline) in str(info.value)
    assert f"retry_period={retry_period}" in str(info.value)


def test_timing_is_frozen() -> None:
    t = LeaseTiming()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.ttl = 10  # type: ignore[misc]
