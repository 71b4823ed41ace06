"""Conversions between Python values and protobuf well-known types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2
from google.protobuf.json_format import MessageToDict


def ts(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    """A Timestamp, or None (leaves the field unset) for None."""
    if value is None:
        return None
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value.astimezone(UTC))
    return out


def from_ts(value: timestamp_pb2.Timestamp) -> datetime:
    return value.ToDatetime(tzinfo=UTC)


def duration(value: timedelta | float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromTimedelta(value if isinstance(value, timedelta) else timedelta(seconds=value))
    return out


def struct(value: dict[str, Any] | None) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    if value:
        out.update(value)
    return out


#: Integers a float64 holds exactly.
_EXACT_INTEGERS = 2**53


def from_struct(value: struct_pb2.Struct) -> dict[str, Any]:
    """The Struct as plain Python values. A Struct holds every number as a double; a number that is
    integral (and exactly representable) comes back as an ``int``, so ``10`` in a run's conf or a
    DAG's params reaches the task as ``10``, not ``10.0``. (JSON does not tell ``10.0`` from ``10``
    either.)"""
    result: dict[str, Any] = _integral(MessageToDict(value))
    return result


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value
