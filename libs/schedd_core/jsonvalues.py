"""JSON values that crossed a ``google.protobuf.Struct`` (which holds every number as a double)."""

from __future__ import annotations

from typing import Any

#: Integers a float64 holds exactly.
EXACT_INTEGERS = 2**53


def integral_numbers(value: Any) -> Any:
    """``value`` with every integral, exactly representable float turned back into an ``int``, so
    ``10`` in a conf or a param reaches a task as ``10``, not ``10.0`` (JSON does not tell them apart
    either)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {k: integral_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_numbers(v) for v in value]
    return value
