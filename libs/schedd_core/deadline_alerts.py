"""Deadline alerts: when a run's deadline falls, which runs missed theirs, and when to look next.
Pure: the leader's alert timer (``schedd_scheduler.deadline_alerts``) reads, this decides.

A DAG's ``DeadlineAlert`` says "a run must finish within ``interval`` after its ``reference``" (its
logical date, or the time it was queued, i.e. created). A run still unfinished at its deadline has
missed it. What :func:`plan` guarantees, for the unfinished runs read at ``now`` (all with the
database's clock):

- every run whose deadline is at or before ``now`` is in ``missed`` (to be recorded: the recording
  itself is once per run, by the table's primary key, whoever records it);
- ``delay`` is no later than the earliest deadline still to come plus ``WAKE_MARGIN``, and no later
  than ``idle_recheck``; so the timer wakes at the deadline, not on a tick.

Not guaranteed: a run that ended after its deadline while no leader was looking (a failover longer
than the rest of the run) is not recorded as a miss; the look only reads unfinished runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedd.v1 import alerts_pb2, resources_pb2 as pb
from schedd_core.errors import InvalidArgument

LOGICAL_DATE = "logical_date"
QUEUED_AT = "queued_at"
REFERENCES = (LOGICAL_DATE, QUEUED_AT)
#: Seconds added to the wait for a deadline still to come, so the next look finds it due.
WAKE_MARGIN = 0.005


@dataclass(frozen=True)
class DeadlineRule:
    reference: str
    interval: timedelta

    def __post_init__(self) -> None:
        if self.reference not in REFERENCES:
            raise InvalidArgument("deadline.reference", f"must be one of {', '.join(REFERENCES)}")
        if self.interval <= timedelta(0):
            raise InvalidArgument("deadline.interval", "must be positive")

    def deadline(self, logical_date: datetime, queued_at: datetime) -> datetime:
        return (logical_date if self.reference == LOGICAL_DATE else queued_at) + self.interval


@dataclass(frozen=True)
class RunDeadline:
    run_pk: int
    at: datetime


@dataclass(frozen=True)
class AlertPlan:
    #: Runs whose deadline passed while unfinished, to record now.
    missed: tuple[RunDeadline, ...]
    #: Seconds until the next look.
    delay: float


def plan(now: datetime, deadlines: list[RunDeadline], *, idle_recheck: float = 60.0) -> AlertPlan:
    missed = tuple(sorted((d for d in deadlines if d.at <= now), key=lambda d: d.run_pk))
    delay = idle_recheck
    for d in deadlines:
        if d.at > now:
            delay = min(delay, (d.at - now) / timedelta(seconds=1) + WAKE_MARGIN)
    return AlertPlan(missed, max(delay, WAKE_MARGIN))


def deadline_rule(spec: pb.DagSpec) -> DeadlineRule | None:
    """The deadline rule of a DAG version, or None when it has none."""
    if not spec.HasField("deadline"):
        return None
    queued = spec.deadline.reference == alerts_pb2.DEADLINE_REFERENCE_QUEUED_AT
    return DeadlineRule(QUEUED_AT if queued else LOGICAL_DATE, spec.deadline.interval.ToTimedelta())
