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


def check_message(message: Message, path: str = "", depth: int = 0) -> None:
    """Raise InvalidArgument for the first field of ``message`` that breaks the rules above."""
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        _check_timestamp(message, path)
        return
    if name == "google.protobuf.Duration":
        _check_duration(message, path)
        return
    if name in _VALUE_TYPES:
        if name != "google.protobuf.Value":
            depth += 1
        if depth > MAX_VALUE_DEPTH:
            raise InvalidArgument(path or "request", f"is nested deeper than {MAX_VALUE_DEPTH} levels")
    for field, value in message.ListFields():
        where = f"{path}.{field.name}" if path else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                entry = f"{where}[{quote(str(key))}]"
                if isinstance(key, str):
                    _check_string(key, entry)
                _check_value(field.message_type.fields_by_name["value"], item, entry, depth)
        elif field.is_repeated:
            for i, item in enumerate(value):
                _check_value(field, item, f"{where}[{i}]", depth)
        else:
            _check_value(field, value, where, depth)


def _check_value(field: FieldDescriptor, value: object, where: str, depth: int) -> None:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        check_message(value, where, depth)  # type: ignore[arg-type]
    elif field.type == FieldDescriptor.TYPE_STRING:
        _check_string(value, where)  # type: ignore[arg-type]
    elif field.type == FieldDescriptor.TYPE_DOUBLE and not math.isfinite(value):  # type: ignore[arg-type]
        raise InvalidArgument(where, f"must be a finite number, not {value}")


def _check_string(value: str, where: str) -> None:
    if "\x00" in value:
        raise InvalidArgument(where, f"contains a NUL character: {quote(value)}")


def _check_timestamp(value: Message, where: str) -> None:
    seconds, nanos = value.seconds, value.nanos  # type: ignore[attr-defined]
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS) or not 0 <= nanos < 1_000_000_000:
        raise InvalidArgument(where, "is not a time between 0001-01-01 and 9999-12-31")


def _check_duration(value: Message, where: str) -> None:
    seconds, nanos = value.seconds, value.nanos  # type: ignore[attr-defined]
    if abs(seconds) > _MAX_DURATION_SECONDS or abs(nanos) >= 1_000_000_000 or seconds * nanos < 0:
        raise InvalidArgument(where, "is not a valid duration")
