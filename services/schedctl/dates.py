"""Dates and times given on the command line (``backfill create --start/--end``, ``runs list
--since/--until``), read the same way everywhere.

A value is an ISO 8601 date (``2024-06-30``) or date-time (``2024-06-30T06:00``, with or without a
UTC offset). A value without an offset is read in a zone: the DAG's time zone when the command is
about one DAG, else UTC. A date alone is a whole day of that zone: as the start of a range it is
the day's first instant; as the end of a range it takes in the whole day, up to the next day's
midnight (so ``--start 2024-06-01 --end 2024-06-30`` covers all of June, whatever time of day the
schedule runs at). A date-time end means exactly that instant, inclusive or exclusive as the
option says. Guaranteed: a malformed value exits 2 naming the option, before any request that
uses it is sent. Not handled: a date whose local midnight does not exist (a DST jump at midnight)
is read with Python's fold rules, an hour off at worst.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from schedctl.cli import EXIT_REJECTED, call, fail, state
from schedd.v1 import api_pb2, resources_pb2 as pb

#: The smallest step of a timestamp the api stores: a closed range ends this much before midnight.
_RESOLUTION = timedelta(microseconds=1)


@dataclass(frozen=True)
class Moment:
    """A parsed value: the instant it starts at, and whether it was a date alone."""

    start: datetime
    whole_day: bool

    def range_end(self, *, inclusive: bool) -> datetime:
        """This value as the end of a range whose end is ``inclusive`` (the api's rule for the
        field): a date alone ends after its whole day; a date-time ends at itself."""
        if not self.whole_day:
            return self.start
        following = datetime.combine(self.start.date() + timedelta(days=1), time.min, self.start.tzinfo)
        next_midnight = following.astimezone(UTC)
        return next_midnight - _RESOLUTION if inclusive else next_midnight


def is_date_only(text: str) -> bool:
    """Whether ``text`` is a date without a time (which needs the zone it is read in)."""
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def parse(text: str, zone: tzinfo, option: str) -> Moment:
    """``text`` as an ISO 8601 date or date-time, read in ``zone`` when it has no offset; exits 2
    naming ``option`` when it is neither."""
    if is_date_only(text):
        day = date.fromisoformat(text)
        return Moment(datetime.combine(day, time.min, zone), whole_day=True)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(EXIT_REJECTED, f"{option} {text!r} is not an ISO 8601 date or date-time (2024-01-31[T06:00])")
    return Moment(moment if moment.tzinfo is not None else moment.replace(tzinfo=zone), whole_day=False)


def dag_zone(dag_id: str) -> tzinfo:
    """The DAG's time zone (UTC for a DAG without one), from the api."""
    dag = call(state.client.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"))
    assert isinstance(dag, pb.Dag)
    try:
        return ZoneInfo(dag.spec.timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        fail(
            EXIT_REJECTED,
            f"dag {dag_id!r} has time zone {dag.spec.timezone!r}, unknown here; give UTC offsets",
        )
