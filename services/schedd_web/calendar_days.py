"""A DAG's runs by day, laid out as weeks (rows, Monday first) of days (columns), for the calendar.

A run counts on the UTC day of its logical date (a manual run's logical date is when it was
triggered). A day shows how many runs it had and how many are in each state, each state with its
glyph as well as its colour, and takes the shape of its most urgent state (failed before running
before success...). Guaranteed: every day from the first shown to the last is in exactly one week,
days after today are marked as such, and runs outside the window are not counted. Not guaranteed:
that every run of a busy window is counted (the page reads at most ``MAX_RUNS``; it says so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from schedd.v1 import resources_pb2 as pb
from schedd_web import present

#: Weeks shown by default and at most.
DEFAULT_WEEKS, MAX_WEEKS = 12, 53
#: The order of urgency of run states: a day takes the first it has.
_URGENCY = ("failed", "running", "queued", "success")


@dataclass(frozen=True)
class Day:
    day: date
    #: ``(state, count)``, most urgent first
    states: tuple[tuple[str, int], ...]
    #: the day is after today (the rest of this week)
    future: bool = False

    @property
    def count(self) -> int:
        return sum(n for _, n in self.states)

    @property
    def state(self) -> str:
        """The most urgent state of the day's runs; ``none`` without runs."""
        return self.states[0][0] if self.states else "none"

    @property
    def title(self) -> str:
        if not self.states:
            return f"{self.day.isoformat()}: no run"
        said = ", ".join(f"{n} {s}" for s, n in self.states)
        return f"{self.day.isoformat()}: {self.count} run{'' if self.count == 1 else 's'} ({said})"


def window(today: date, weeks: int) -> tuple[date, date]:
    """The first and last day shown: ``weeks`` whole weeks (Monday to Sunday) ending with today's."""
    last = today + timedelta(days=6 - today.weekday())
    return last - timedelta(days=7 * weeks - 1), last


def day_of(run: pb.DagRun) -> date:
    """The UTC day of the run's logical date (of its creation when it has none)."""
    ts = run.logical_date if run.logical_date.seconds else run.create_time
    return datetime.fromtimestamp(ts.seconds, UTC).date()


def _order(state: str) -> int:
    return _URGENCY.index(state) if state in _URGENCY else len(_URGENCY)


def weeks_of(runs: Iterable[pb.DagRun], today: date, weeks: int) -> list[list[Day]]:
    """The weeks of the window ending with ``today``'s week, oldest first, each Monday to Sunday."""
    first, _ = window(today, weeks)
    counts: dict[date, Counter[str]] = {}
    for run in runs:
        day = day_of(run)
        if first <= day <= today:
            counts.setdefault(day, Counter())[present.run_state(run.state)] += 1
    rows: list[list[Day]] = []
    for week in range(weeks):
        row = []
        for offset in range(7):
            day = first + timedelta(days=7 * week + offset)
            found = counts.get(day, Counter())
            states = tuple(sorted(found.items(), key=lambda item: (_order(item[0]), item[0])))
            row.append(Day(day, states, future=day > today))
        rows.append(row)
    return rows


def read_weeks(raw: str) -> int:
    """The ``weeks`` query value: a whole number from 1 to MAX_WEEKS (empty: DEFAULT_WEEKS);
    ValueError naming the field otherwise."""
    if not raw:
        return DEFAULT_WEEKS
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_WEEKS:
        raise ValueError(f"weeks: must be a whole number from 1 to {MAX_WEEKS}, not {raw!r}")
    return int(raw)


def read_day(raw: str) -> date:
    """A ``YYYY-MM-DD`` day; ValueError naming the field otherwise."""
    try:
        return date.fromisoformat(raw) if len(raw) == 10 else date.fromisoformat("bad")
    except ValueError:
        raise ValueError(f"day: must be a date as YYYY-MM-DD, not {raw!r}") from None
