"""``schedd_rpc.convert``'s Timestamp conversions give exactly what protobuf's own give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from schedd_rpc import convert

DATETIMES = [
    datetime(2026, 12, 7, 17, 30, 5, 123456, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1900, 2, 28, 1, 2, 3, 4, tzinfo=UTC),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2026, 3, 29, 2, 30, 0, 500000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Berlin")),
    datetime(2026, 10, 25, 2, 30, fold=0, tzinfo=ZoneInfo("Europe/Berlin")),
    datetime(2026, 12, 7, 17, 30, 5, 42),  # naive: local time, as astimezone takes it
]


def _protobufs(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value.astimezone(UTC))
    return out


@pytest.mark.parametrize("value", DATETIMES, ids=lambda d: d.isoformat())
def test_a_datetime_becomes_the_timestamp_protobuf_makes_of_it(value: datetime) -> None:
    assert convert.ts(value) == _protobufs(value)


@pytest.mark.parametrize("value", DATETIMES, ids=lambda d: d.isoformat())
def test_a_timestamp_becomes_the_datetime_protobuf_makes_of_it(value: datetime) -> None:
    stamp = _protobufs(value)
    back = convert.from_ts(stamp)
    assert back == stamp.ToDatetime(tzinfo=UTC)
    assert back.tzinfo is UTC


@pytest.mark.parametrize("nanos", [0, 1, 999, 1_000, 123_456_789, 999_999_999])
def test_nanoseconds_are_cut_to_microseconds_as_protobuf_cuts_them(nanos: int) -> None:
    for seconds in (-86_401, -1, 0, 1_796_665_000):
        stamp = Timestamp(seconds=seconds, nanos=nanos)
        assert convert.from_ts(stamp) == stamp.ToDatetime(tzinfo=UTC)


def test_none_leaves_the_field_unset() -> None:
    assert convert.ts(None) is None
