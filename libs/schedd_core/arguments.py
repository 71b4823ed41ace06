"""A Python task's arguments at run time: literals and upstream results, resolved on the worker.

A task spec's ``python.args`` / ``python.kwargs`` (``schedd.v1.Argument``) reach the task's process as
the JSON text of its ``PythonCallable`` (protobuf JSON with proto field names) in the environment
variable ``SCHEDD_TASK_ARGUMENTS``; :func:`resolve_arguments` turns that text and the task's
upstream results (``SCHEDD_UPSTREAM_RESULTS``: the stored return values of its direct upstream
tasks, by task id) into the positional and keyword arguments to call it with.

Guaranteed: a reference to an upstream task that stored no value (it returned None, was skipped or
failed) resolves to None, and so does any key of it; literals arrive as the JSON values they were
written as, except that an integral number arrives as an int (as ``params`` do: protobuf keeps numbers
as doubles). A key missing from a stored JSON object, or a key of a value that is not an object, is
an :class:`ArgumentError` naming the task and the key. Not checked here: that the arguments fit the
callable's signature (the SDK checks that when the DAG is defined; Python raises TypeError).
A mapped task instance's expanded arguments are resolved by :mod:`schedd_core.mapped_arguments`.

Only ``json`` (and the small ``jsonvalues``) is imported, so the worker's warm children pay nothing for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from schedd_core.jsonvalues import integral_numbers

#: The environment variable holding a task's arguments.
ARGUMENTS_ENV = "SCHEDD_TASK_ARGUMENTS"


class ArgumentError(Exception):
    """An argument cannot be resolved from the upstream results; the message says which and why."""


def resolve_arguments(text: str, upstream: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The ``(args, kwargs)`` of a task from its ``PythonCallable`` JSON and its upstream results."""
    callable_ = json.loads(text)
    if not isinstance(callable_, dict):
        raise ArgumentError(f"{ARGUMENTS_ENV} is not a JSON object")
    args = [
        resolve_argument(a, upstream, f"argument {i + 1}") for i, a in enumerate(callable_.get("args", []))
    ]
    kwargs = {
        k: resolve_argument(a, upstream, f"argument {k}=") for k, a in callable_.get("kwargs", {}).items()
    }
    return args, kwargs


def resolve_argument(argument: Mapping[str, Any], upstream: Mapping[str, Any], where: str) -> Any:
    """The value of one ``Argument`` (its protobuf JSON, parsed); ``where`` starts error messages."""
    if "literal" in argument:
        return integral_numbers(argument["literal"])
    if "result" in argument:
        ref = argument["result"]
        task_id = ref["task_id"]
        value = upstream.get(task_id)
        if "key" not in ref or value is None:
            return value
        key = ref["key"]
        if not isinstance(value, dict):
            raise ArgumentError(
                f"{where}: {task_id}[{key!r}]: {task_id!r} returned a {type(value).__name__}, "
                "not a JSON object"
            )
        if key not in value:
            raise ArgumentError(
                f"{where}: {task_id}[{key!r}]: {task_id!r} returned no key {key!r} (its keys: "
                f"{', '.join(sorted(map(repr, value))) or 'none'})"
            )
        return value[key]
    if "list" in argument:
        return [resolve_argument(a, upstream, where) for a in argument["list"].get("items", [])]
    if "map" in argument:
        return {k: resolve_argument(a, upstream, where) for k, a in argument["map"].get("fields", {}).items()}
    raise ArgumentError(f"{where}: an argument needs a literal, result, list or map")
