"""Validation of the Duration fields of a DAG spec (timeouts, intervals, delays)."""

from __future__ import annotations

from google.protobuf import duration_pb2

from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_DURATION_SECONDS


def check_duration(field: str, value: duration_pb2.Duration, *, positive: bool = False) -> None:
    """A Duration field: not negative (positive when asked), at most a year."""
    seconds = value.seconds + value.nanos / 1e9
    if seconds < 0 or (positive and seconds <= 0):
        raise InvalidArgument(field, "must be positive" if positive else "must not be negative")
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidArgument(field, f"must be at most {MAX_DURATION_SECONDS // 86400} days")
