"""A mapped task instance's expanded arguments at run time: its elements of the mapped lists.

An instance of a mapped task (``TaskSpec.mapping``) gets, besides its partial arguments
(``python.args`` / ``python.kwargs``, resolved by :mod:`schedd_core.arguments`), one keyword argument
per expanded argument: the element at its position of that argument's list. Its process receives the
task's ``TaskMapping`` as protobuf JSON with proto field names in ``SCHEDD_TASK_MAPPING`` and its map
index in ``SCHEDD_MAP_INDEX``; :func:`resolve_mapped_arguments` turns them and the upstream results
into those keyword arguments.

A list is a literal list, or an upstream task's result (or one key of it), resolved by the same rules
as any argument (a mapped upstream task's result is the list of its instances' results). With several
expanded arguments the instance takes combination ``map_index`` of their cartesian product, the last
argument varying fastest (:func:`schedd_core.mapping.elements_for`).

Guaranteed: a value that is not a list, or a map index outside the combinations, is an
:class:`~schedd_core.arguments.ArgumentError` naming the argument (the task fails; nothing is called).
Not checked here: that the lists still have the lengths the scheduler measured when it expanded the
task (an upstream result does not change once stored).

Imports only ``json``-sized modules, like :mod:`schedd_core.arguments`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from schedd_core.arguments import ArgumentError, resolve_argument
from schedd_core.mapping import elements_for

#: The environment variable holding a mapped task's ``TaskMapping`` (protobuf JSON).
MAPPING_ENV = "SCHEDD_TASK_MAPPING"
#: The environment variable holding a mapped task instance's map index (decimal).
MAP_INDEX_ENV = "SCHEDD_MAP_INDEX"


def resolve_mapped_arguments(text: str, map_index: str, upstream: Mapping[str, Any]) -> dict[str, Any]:
    """The expanded keyword arguments of instance ``map_index`` (decimal text) from its task's
    ``TaskMapping`` JSON (``text``) and its upstream results."""
    mapping = json.loads(text)
    if not isinstance(mapping, dict) or not isinstance(mapping.get("expand"), list):
        raise ArgumentError(f"{MAPPING_ENV} is not a JSON object with a list 'expand'")
    if not map_index.isdigit():
        raise ArgumentError(f"{MAP_INDEX_ENV} is {map_index!r}, not a map index (0, 1, ...)")
    index = int(map_index)
    names: list[str] = []
    lists: list[list[Any]] = []
    for argument in mapping["expand"]:
        name = str(argument.get("name", ""))
        value = resolve_argument(argument.get("values", {}), upstream, f"argument {name}=")
        if not isinstance(value, list):
            raise ArgumentError(f"cannot expand {name}=: {_source(argument)} is {_kind(value)}, not a list")
        names.append(name)
        lists.append(value)
    combinations = 1
    for values in lists:
        combinations *= len(values)
    if index >= combinations:
        sizes = ", ".join(
            f"{name}=: {len(values)} elements" for name, values in zip(names, lists, strict=True)
        )
        raise ArgumentError(
            f"map index {index} is out of range: the expanded arguments have {combinations} "
            f"combination{'' if combinations == 1 else 's'} ({sizes})"
        )
    return dict(zip(names, elements_for(lists, index), strict=True))


def _source(argument: Mapping[str, Any]) -> str:
    ref = argument.get("values", {}).get("result")
    if ref is None:
        return "the literal value"
    task_id = ref.get("task_id", "")
    return f"{task_id}[{ref['key']!r}]" if "key" in ref else f"the result of {task_id!r}"


def _kind(value: object) -> str:
    if value is None:
        return "None (no stored result: the task returned None, was skipped or failed)"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
