"""Dynamic task mapping: the identity of a mapped task's instances, and how its arguments expand.

A mapped task (``TaskSpec.mapping``) has one task instance with map index -1 until it is ready to
run; then the scheduler *expands* it into one task instance per combination of its expanded
arguments' elements, map indexes 0..n-1, and removes that placeholder (with no elements, the
placeholder is skipped instead, as in Airflow). Everywhere a task instance is named, a mapped one is
``{task_id}[{map_index}]`` (its *key*); an unmapped one is its task id. Task ids cannot contain
brackets (``schedd_core.identifiers.ID_PATTERN``), so a key is never ambiguous.

With several expanded arguments, instance ``i`` takes the combination at position ``i`` of their
cartesian product, the last argument varying fastest (``itertools.product``'s order, as Airflow's
``expand`` with several keyword arguments).

Pure and dependency-free: the planner, the store, the api and the worker's child processes import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The map index of a task instance that is not one of a mapped task's instances.
UNMAPPED = -1


def instance_key(task_id: str, map_index: int) -> str:
    """``task_id`` for an unmapped task instance, ``task_id[i]`` for instance ``i`` of a mapped task."""
    return task_id if map_index < 0 else f"{task_id}[{map_index}]"


def split_key(key: str) -> tuple[str, int]:
    """``(task_id, map_index)`` of a key (map index -1 for a plain task id).

    Raises ValueError for a key with a bracket that is not ``[digits]`` at its end."""
    if not key.endswith("]"):
        if "[" in key or "]" in key:
            raise ValueError(f"{key!r} is not a task id or task_id[map_index]")
        return key, UNMAPPED
    task_id, sep, index = key[:-1].partition("[")
    if not sep or not task_id or not index.isdigit() or (len(index) > 1 and index[0] == "0"):
        raise ValueError(f"{key!r} is not a task id or task_id[map_index]")
    if len(index) > 9:
        raise ValueError(f"{key!r}: the map index is too large")
    return task_id, int(index)


def task_of(key: str) -> str:
    """The task id of a key (fast path: the planner calls this per task instance)."""
    return key if not key.endswith("]") else key[: key.rindex("[")]


class ExpansionError(Exception):
    """A mapped task's arguments cannot be expanded (not a list, too many elements); the message
    names the argument and says why."""


def expansion_length(lengths: Sequence[tuple[str, int | None]], limit: int) -> int:
    """How many instances a mapped task expands into: the product of its arguments' lengths.

    ``lengths`` holds, per expanded argument in order, its name and its list's length (None when the
    value is not a list: the upstream task returned something else, or nothing). Raises
    :class:`ExpansionError` when a value is not a list or the product passes ``limit``."""
    total = 1
    for name, length in lengths:
        if length is None:
            raise ExpansionError(f"cannot expand {name}=: its value is not a list")
        total *= length
        if total > limit:
            raise ExpansionError(
                f"cannot expand {name}=: the task would have more than {limit} instances "
                "(the scheduler's --max-map-length)"
            )
    return total


def element_indexes(lengths: Sequence[int], map_index: int) -> list[int]:
    """The position in each expanded argument's list of instance ``map_index``'s element (the last
    argument varying fastest)."""
    positions: list[int] = []
    for length in reversed(lengths):
        map_index, position = divmod(map_index, length)
        positions.append(position)
    positions.reverse()
    return positions


def elements_for(values: Sequence[Sequence[Any]], map_index: int) -> list[Any]:
    """The elements instance ``map_index`` takes, one per expanded argument (``values``: the lists)."""
    positions = element_indexes([len(v) for v in values], map_index)
    return [v[p] for v, p in zip(values, positions, strict=True)]
