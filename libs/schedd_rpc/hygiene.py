"""What every request must satisfy before any servicer sees it, whatever its type.

:func:`check_message` walks a decoded protobuf message and raises :class:`InvalidArgument` naming
the field (``spec.tasks[2].env["X"]``) for:

- a NUL character in any string (PostgreSQL text cannot hold one);
- a Timestamp outside 0001-01-01 .. 9999-12-31 or with invalid nanos, a Duration outside
  +-10,000 years or with nanos of the wrong sign;
- a Struct / ListValue nested deeper than ``MAX_VALUE_DEPTH``, and a number in one that is not
  finite (NaN or infinity do not survive JSON).

Invalid UTF-8 and messages nested past protobuf's own limit are refused earlier, when the bytes
are decoded (``schedd_rpc.frame``). Error messages quote a bounded prefix of a bad value
(``schedd_core.errors.quote``).
"""

from __future__ import annotations

import math

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from schedd_core.errors import InvalidArgument, quote

#: Deepest nesting of Struct and ListValue values (conf, params) a request may carry.
MAX_VALUE_DEPTH = 32

_MIN_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
_MAX_DURATION_SECONDS = 315576000000  # 10,000 years
_VALUE_TYPES = {"google.protobuf.Struct", "google.protobuf.ListValue", "google.protobuf.Value"}


class _Bad(Exception):
    """A rule broken deep in a message; the field path is assembled on the way out (the walk builds
    no path strings for fields that pass)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.segments: list[str] = []


def check_message(message: Message) -> None:
    """Raise InvalidArgument for the first field of ``message`` that breaks the rules above."""
    try:
        _check_message(message, 0)
    except _Bad as bad:
        path = "".join(reversed(bad.segments)).lstrip(".")
        raise InvalidArgument(path or "request", bad.problem) from None


def _check_message(message: Message, depth: int) -> None:
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        _check_timestamp(message)
        return
    if name == "google.protobuf.Duration":
        _check_duration(message)
        return
    if name in _VALUE_TYPES:
        if name != "google.protobuf.Value":
            depth += 1
        if depth > MAX_VALUE_DEPTH:
            raise _Bad(f"is nested deeper than {MAX_VALUE_DEPTH} levels")
    for field, value in message.ListFields():
        try:
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                item_field = field.message_type.fields_by_name["value"]
                for key, item in value.items():
                    try:
                        if isinstance(key, str):
                            _check_string(key)
                        _check_value(item_field, item, depth)
                    except _Bad as bad:
                        bad.segments.append(f"[{quote(str(key))}]")
                        raise
            elif field.is_repeated:
                for i, item in enumerate(value):
                    try:
                        _check_value(field, item, depth)
                    except _Bad as bad:
                        bad.segments.append(f"[{i}]")
                        raise
            else:
                _check_value(field, value, depth)
        except _Bad as bad:
            bad.segments.append(f".{field.name}")
            raise


def _check_value(field: FieldDescriptor, value: object, depth: int) -> None:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        _check_message(value, depth)  # type: ignore[arg-type]
    elif field.type == FieldDescriptor.TYPE_STRING:
        _check_string(value)  # type: ignore[arg-type]
    elif field.type == FieldDescriptor.TYPE_DOUBLE and not math.isfinite(value):  # type: ignore[arg-type]
        raise _Bad(f"must be a finite number, not {value}")


def _check_string(value: str) -> None:
    if "\x00" in value:
        raise _Bad(f"contains a NUL character: {quote(value)}")


def _check_timestamp(value: Message) -> None:
    seconds, nanos = value.seconds, value.nanos  # type: ignore[attr-defined]
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS) or not 0 <= nanos < 1_000_000_000:
        raise _Bad("is not a time between 0001-01-01 and 9999-12-31")


def _check_duration(value: Message) -> None:
    seconds, nanos = value.seconds, value.nanos  # type: ignore[attr-defined]
    if abs(seconds) > _MAX_DURATION_SECONDS or abs(nanos) >= 1_000_000_000 or seconds * nanos < 0:
        raise _Bad("is not a valid duration")
