"""What every request must satisfy before any servicer sees it, whatever its type.

:func:`check_message` walks a decoded protobuf message and raises :class:`InvalidArgument` naming
the field (``spec.tasks[2].env["X"]``) for:

- a NUL character in any string (PostgreSQL text cannot hold one);
- a Timestamp outside 0001-01-01 .. 9999-12-31 or with invalid nanos, a Duration outside
  +-10,000 years or with nanos of the wrong sign;
- a Struct / ListValue nested deeper than ``MAX_VALUE_DEPTH``, and a number in one that is not
  finite (NaN or infinity do not survive JSON).

Which fields of a message type can break a rule is worked out once per type (``_plan``), so the
walk of a request looks only at its strings, doubles, times and the messages that can hold them.

Invalid UTF-8 and messages nested past protobuf's own limit are refused earlier, when the bytes
are decoded (``schedd_rpc.frame``). Error messages quote a bounded prefix of a bad value
(``schedd_core.errors.quote``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from schedd_core.errors import InvalidArgument, quote

#: Deepest nesting of Struct and ListValue values (conf, params) a request may carry.
MAX_VALUE_DEPTH = 32

_MIN_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
_MAX_DURATION_SECONDS = 315576000000  # 10,000 years
#: The value types whose every level counts towards ``MAX_VALUE_DEPTH`` (a Value between them does not).
_NESTING_TYPES = {"google.protobuf.Struct", "google.protobuf.ListValue"}
_VALUE_TYPES = {*_NESTING_TYPES, "google.protobuf.Value"}


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


# What the walk does with a field is decided once per message type (``_plan``): integers,
# booleans, enums, bytes and messages that can hold nothing to check are never looked at.
_STRING = 1
_DOUBLE = 2
_MESSAGE = 3
# a field's shape
_SINGLE = 0
_REPEATED = 1
_MAP = 2

_TIMESTAMP = "google.protobuf.Timestamp"
_DURATION = "google.protobuf.Duration"


class _Step(NamedTuple):
    """How to walk one field: its shape, the kind of its values (0: nothing to check in them) and,
    for a map, whether its keys are strings."""

    shape: int
    kind: int
    string_keys: bool = False


class _Plan(NamedTuple):
    """How to check one message type: its full name, whether it counts as a level of value nesting,
    and the fields worth walking, by field number."""

    name: str
    nests: bool
    steps: dict[int, _Step]


#: Keyed by descriptor (protobuf's Python and upb descriptors are distinct types to mypy).
_PLANS: dict[Any, _Plan] = {}
_PLANNING: set[Any] = set()


def _plan(descriptor: Any) -> _Plan:
    plan = _PLANS.get(descriptor)
    if plan is None:
        _PLANNING.add(descriptor)
        try:
            steps = {f.number: step for f in descriptor.fields if (step := _field_step(f)) is not None}
        finally:
            _PLANNING.discard(descriptor)
        plan = _PLANS[descriptor] = _Plan(descriptor.full_name, descriptor.full_name in _NESTING_TYPES, steps)
    return plan


def _field_step(field: FieldDescriptor) -> _Step | None:
    """How to walk ``field``, or None for a field whose values cannot break a rule."""
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        string_keys = entry.fields_by_name["key"].type == FieldDescriptor.TYPE_STRING
        kind = _value_kind(entry.fields_by_name["value"])
        return _Step(_MAP, kind, string_keys) if string_keys or kind else None
    kind = _value_kind(field)
    return _Step(_REPEATED if field.is_repeated else _SINGLE, kind) if kind else None


def _value_kind(field: FieldDescriptor) -> int:
    if field.type == FieldDescriptor.TYPE_STRING:
        return _STRING
    if field.type == FieldDescriptor.TYPE_DOUBLE:
        return _DOUBLE
    if field.type == FieldDescriptor.TYPE_MESSAGE and _may_break(field.message_type):
        return _MESSAGE
    return 0


def _may_break(descriptor: Any) -> bool:
    """Whether a message of this type can break a rule; a type still being planned (one that contains
    itself) is assumed to."""
    if descriptor in _PLANNING or descriptor.full_name in (_TIMESTAMP, _DURATION, *_VALUE_TYPES):
        return True
    return bool(_plan(descriptor).steps)


def _check_message(message: Message, depth: int) -> None:
    plan = _PLANS.get(message.DESCRIPTOR) or _plan(message.DESCRIPTOR)
    if plan.name == _TIMESTAMP:
        _check_timestamp(message)
        return
    if plan.name == _DURATION:
        _check_duration(message)
        return
    if plan.nests:
        depth += 1
        if depth > MAX_VALUE_DEPTH:
            raise _Bad(f"is nested deeper than {MAX_VALUE_DEPTH} levels")
    steps = plan.steps
    if not steps:
        return
    for field, value in message.ListFields():
        step = steps.get(field.number)
        if step is None:
            continue
        try:
            if step.shape == _MAP:
                _check_map(value, step, depth)
            elif step.shape == _REPEATED:
                for i, item in enumerate(value):
                    try:
                        _check_value(step.kind, item, depth)
                    except _Bad as bad:
                        bad.segments.append(f"[{i}]")
                        raise
            else:
                _check_value(step.kind, value, depth)
        except _Bad as bad:
            bad.segments.append(f".{field.name}")
            raise


def _check_map(entries: Any, step: _Step, depth: int) -> None:
    for key, item in entries.items():
        try:
            if step.string_keys:
                _check_string(key)
            _check_value(step.kind, item, depth)
        except _Bad as bad:
            bad.segments.append(f"[{quote(str(key))}]")
            raise


def _check_value(kind: int, value: Any, depth: int) -> None:
    if kind == _MESSAGE:
        _check_message(value, depth)
    elif kind == _STRING:
        _check_string(value)
    elif kind == _DOUBLE and not math.isfinite(value):
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
