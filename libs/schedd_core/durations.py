"""Validation of the Duration fields of a DAG spec (timeouts, intervals, delays)."""

from __future__ import annotations

from google.protobuf import duration_pb2

from schedd_core.errors import InvalidArgument

#: The longest duration a spec may give: no value a pass computes from one can overflow a column.
MAX_DURATION_SECONDS = 366 * 24 * 3600


def check_duration(field: str, value: duration_pb2.Duration, *, positive: bool = False) -> None:
    """A Duration field: not negative (positive when asked), at most a year."""
    seconds = value.seconds + value.nanos / 1e9
    if seconds < 0 or (positive and seconds <= 0):
        raise InvalidArgument(field, "must be positive" if positive else "must not be negative")
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidArgument(field, f"must be at most {MAX_DURATION_SECONDS // 86400} days")
