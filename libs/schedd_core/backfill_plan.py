"""Which runs of a backfill to make next, by its strategy: a pure function of where it stands.

A backfill's intervals are stored in the order their runs are made (oldest first, or newest first
for a backward backfill), each with its chunk (``position // chunk_size``) and a status. A step
looks at a *window*: every interval whose run is in flight (``created``) and the first waiting
ones (``pending``), at least ``max_active_runs`` or a chunk's worth of them; the intervals whose
runs ended were settled before (``succeeded``, ``failed``; ``skipped`` when a run existed and the
reprocess behaviour left it alone, which counts as done). :func:`plan_backfill` says which
intervals to start and whether the backfill is over:

- **sequential**: one run at a time, in order; the backfill fails at the first run that fails
  (the intervals after it are never started);
- **parallel**: up to ``max_active_runs`` runs at once, in order; a failure does not stop the
  others, and the backfill ends failed once everything finished if any run failed;
- **chunked**: chunk after chunk; every interval of a chunk is started at once, and the next chunk
  only once every run of this one succeeded (or was skipped); a failure fails the backfill once
  the runs in flight ended.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from schedd_core.errors import InvalidArgument
from schedd_core.states import BackfillState
from schedd_core.timetables import DataInterval, Timetable

#: The most intervals one backfill may cover.
MAX_INTERVALS = 10_000


class Strategy(enum.StrEnum):
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"
    CHUNKED = "chunked"


class Reprocess(enum.StrEnum):
    SKIP_EXISTING = "skip_existing"
    RERUN_FAILED = "rerun_failed"
    RERUN_ALL = "rerun_all"


class IntervalStatus(enum.StrEnum):
    """Where one interval of a backfill stands (``backfill_intervals.status``)."""

    PENDING = "pending"  # no run made yet
    CREATED = "created"  # its run is queued or running
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class WindowEntry:
    position: int
    chunk: int
    status: IntervalStatus


@dataclass
class BackfillStep:
    #: Positions of the intervals whose runs to make now, in order.
    start: list[int] = field(default_factory=list)
    #: Set when the backfill is over.
    final: BackfillState | None = None


@dataclass(frozen=True)
class PlannedInterval:
    position: int
    chunk: int
    interval: DataInterval


def backfill_intervals(
    timetable: Timetable, start: datetime, end: datetime, *, backward: bool, chunk_size: int
) -> list[PlannedInterval]:
    """The schedule's runs with logical dates in ``[start, end]`` (for a trigger timetable, its ticks
    there, each with its interval and logical date), in the order they are made, each with its
    chunk. InvalidArgument (naming the field) for an empty or oversized range."""
    if end < start:
        raise InvalidArgument("backfill.end_date", "is before the start date")
    found = list(itertools.islice(timetable.intervals_between(start, end), MAX_INTERVALS + 1))
    if len(found) > MAX_INTERVALS:
        raise InvalidArgument(
            "backfill.end_date",
            f"the range holds more than {MAX_INTERVALS} intervals of the schedule; split the backfill",
        )
    if not found:
        raise InvalidArgument(
            "backfill.start_date", "no run of the schedule has its logical date in the range"
        )
    if backward:
        found.reverse()
    return [PlannedInterval(n, n // chunk_size, interval) for n, interval in enumerate(found)]


def window_size(strategy: Strategy, *, max_active_runs: int, chunk_size: int) -> int:
    """How many pending intervals a step must see."""
    if strategy is Strategy.SEQUENTIAL:
        return 1
    if strategy is Strategy.PARALLEL:
        return max_active_runs
    return chunk_size


def plan_backfill(
    strategy: Strategy, window: Sequence[WindowEntry], *, failed: bool, max_active_runs: int
) -> BackfillStep:
    """The next step; ``failed`` says whether any settled interval's run failed."""
    ordered = sorted(window, key=lambda e: e.position)
    pending = [e.position for e in ordered if e.status is IntervalStatus.PENDING]
    active = sum(e.status is IntervalStatus.CREATED for e in ordered)
    if failed and strategy is not Strategy.PARALLEL:
        # Sequential and chunked stop at a failure, once nothing of theirs runs any more.
        return BackfillStep() if active else BackfillStep(final=BackfillState.FAILED)
    if not pending:
        if active:
            return BackfillStep()
        return BackfillStep(final=BackfillState.FAILED if failed else BackfillState.SUCCEEDED)
    if strategy is Strategy.SEQUENTIAL:
        return BackfillStep(start=[] if active else pending[:1])
    if strategy is Strategy.PARALLEL:
        return BackfillStep(start=pending[: max(0, max_active_runs - active)])
    current = min(e.chunk for e in ordered)
    return BackfillStep(
        start=[e.position for e in ordered if e.chunk == current and e.status is IntervalStatus.PENDING]
    )
