"""The local autoscaler's decision rule (``schedd_devstack.autoscale``): the workers a queue's demand
asks for, bounded, with the scale-down stabilisation window, on a fake clock; and the metric read
from a ``/metrics`` page."""

from __future__ import annotations

import pytest

from schedd_devstack.autoscale import ScaleRule, desired_workers, queue_demand


@pytest.mark.parametrize(
    ("demand", "expected"),
    [(0, 1), (1, 1), (4, 1), (5, 2), (8, 2), (9, 3), (16, 4), (17, 5), (2000, 5), (3.5, 1)],
)
def test_desired_workers_is_the_demand_over_the_slots_rounded_up_and_bounded(
    demand: float, expected: int
) -> None:
    assert desired_workers(demand, slots_per_worker=4, min_workers=1, max_workers=5) == expected


def test_a_queue_without_demand_may_scale_to_zero() -> None:
    assert desired_workers(0, slots_per_worker=2, min_workers=0, max_workers=3) == 0
    assert desired_workers(0.5, slots_per_worker=2, min_workers=0, max_workers=3) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"slots_per_worker": 0, "min_workers": 1, "max_workers": 2},
        {"slots_per_worker": 1, "min_workers": 3, "max_workers": 2},
        {"slots_per_worker": 1, "min_workers": -1, "max_workers": 2},
        {"slots_per_worker": 1, "min_workers": 1, "max_workers": 2, "scale_down_window": -1},
    ],
)
def test_a_rule_that_makes_no_sense_is_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        ScaleRule(**kwargs)


def test_scale_up_is_immediate() -> None:
    rule = ScaleRule(slots_per_worker=2, min_workers=1, max_workers=4, scale_down_window=10)
    assert rule.decide(0.0, 0, current=1) == 1
    assert rule.decide(1.0, 5, current=1) == 3
    assert rule.decide(2.0, 100, current=3) == 4


def test_scale_down_waits_for_the_window_to_forget_the_higher_demand() -> None:
    rule = ScaleRule(slots_per_worker=2, min_workers=1, max_workers=4, scale_down_window=6)
    assert rule.decide(0.0, 100, current=1) == 4
    assert rule.decide(5.0, 3, current=4) == 4  # 2 wanted, but 4 were wanted 5 s ago
    assert rule.decide(6.0, 0, current=4) == 4
    assert rule.decide(10.9, 0, current=4) == 2  # the 4 is forgotten; the 2 of t=5 is not
    assert rule.decide(11.5, 0, current=2) == 1
    assert rule.decide(12.0, 0, current=1) == 1


def test_scale_down_never_goes_up_from_a_remembered_peak() -> None:
    """A count remembered in the window holds the workers that run; it does not start new ones."""
    rule = ScaleRule(slots_per_worker=1, min_workers=1, max_workers=8, scale_down_window=60)
    assert rule.decide(0.0, 8, current=8) == 8
    assert rule.decide(1.0, 2, current=3) == 3  # three left after crashes: not back to eight
    assert rule.decide(2.0, 5, current=3) == 5


def test_without_a_window_scale_down_follows_the_demand() -> None:
    rule = ScaleRule(slots_per_worker=4, min_workers=1, max_workers=4)
    assert rule.decide(0.0, 16, current=1) == 4
    assert rule.decide(0.1, 9, current=4) == 3
    assert rule.decide(0.2, 0, current=3) == 1


METRICS = """\
# HELP schedd_queue_demand Task instances queued plus attempts running, per queue.
# TYPE schedd_queue_demand gauge
schedd_queue_demand{queue="default"} 1234.0
schedd_queue_demand{queue="batch"} 7.0
# HELP schedd_queue_depth Task instances queued, per queue.
# TYPE schedd_queue_depth gauge
schedd_queue_depth{queue="default"} 99.0
"""


def test_the_demand_of_one_queue_is_read_from_a_metrics_page() -> None:
    assert queue_demand(METRICS, "default") == 1234.0
    assert queue_demand(METRICS, "batch") == 7.0


def test_a_queue_without_a_series_has_no_demand() -> None:
    assert queue_demand(METRICS, "gpu") == 0.0
    assert queue_demand("", "default") == 0.0
