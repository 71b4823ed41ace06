"""TaskFlow arguments: the values a task call passes, checked and compiled to ``python.args/kwargs``.

Inside a DAG definition, ``summary = transform(raw, limit=10)`` binds ``transform``'s parameters:
a task (``raw``) or one key of its result (``raw["rows"]``, a :class:`TaskResult`) stands for that
task's return value at run time and makes it an upstream task; anything else must be a JSON
literal (None, bool, int, float, str, and lists and dicts of them, which may hold task references
too). The worker resolves the references from the stored upstream results
(:mod:`schedd_core.arguments`) and calls the function with the values.

Checked when the call is made, so the error points at the line and names the task: that the
arguments fit the function's signature (``params``, ``context`` and the task context's names, such
as ``ds`` or ``ti``, are left to the worker when the function declares them and the call does not
give them; ``params`` and ``context`` cannot be given), that a reference is to a Python task of
the same DAG (a shell task returns nothing), that a key is a string, and that every literal is JSON.

:class:`TaskResult` and :class:`BoundArguments` are defined with the tasks (:mod:`schedd_sdk.tasks`),
which hold them, and exported here too.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from google.protobuf import struct_pb2

from schedd.v1 import resources_pb2 as pb
from schedd_core.task_context import CONTEXT_NAMES
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.protocols import task_function_name
from schedd_sdk.tasks import BoundArguments, Task, TaskResult

__all__ = ["BoundArguments", "TaskResult", "bind", "compile_argument"]

#: Keyword arguments only a worker passes (a call may not give them).
WORKER_PASSED = ("params", "context")
#: Keyword arguments a worker passes to a task function that declares them and whose call does not
#: give them: ``params``, ``context`` and the task context's names (``schedd_core.task_context``).
RUNTIME_ARGUMENTS = tuple(dict.fromkeys((*WORKER_PASSED, *CONTEXT_NAMES)))


def bind(
    name: str,
    function: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    expanded: Collection[str] = (),
) -> BoundArguments:
    """Check and compile the arguments of a call of task function ``function`` made as task ``name``.

    ``expanded`` names the keyword arguments a mapped task gets per instance
    (:mod:`schedd_sdk.mapping`): they count for the signature check but are not compiled here."""
    _check_signature(name, function, args, {**kwargs, **dict.fromkeys(expanded)})
    bound = BoundArguments()
    bound.args = [compile_argument(name, f"argument {i + 1}", a, bound) for i, a in enumerate(args)]
    bound.kwargs = {k: compile_argument(name, f"argument {k}=", v, bound) for k, v in kwargs.items()}
    return bound


def _check_signature(
    name: str, function: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        given = signature.bind_partial(*args, **kwargs).arguments
    except TypeError as exc:
        raise DagDefinitionError(
            f"{name}(): the arguments do not fit {function.__qualname__}{signature}: {exc}"
        ) from None
    keywordable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    passed = {
        p.name for p in signature.parameters.values() if p.kind in keywordable and p.name in WORKER_PASSED
    }
    taken = sorted(passed & set(given))
    if taken:
        raise DagDefinitionError(
            f"{name}(): {', '.join(taken)} is passed by the worker (the DAG's params with the run's "
            "conf on top, the run's context); set params with @task(params={...}) or .override(params=...)"
        )
    # what the worker fills in: the runtime names the function declares and the call does not give
    filled = {
        p.name: None
        for p in signature.parameters.values()
        if p.kind in keywordable and p.name in RUNTIME_ARGUMENTS and p.name not in given
    }
    try:
        signature.bind(*args, **kwargs, **filled)
    except TypeError as exc:
        raise DagDefinitionError(
            f"{name}(): the arguments do not fit {function.__qualname__}{signature}: {exc}"
        ) from None


def compile_argument(name: str, label: str, value: object, bound: BoundArguments) -> pb.Argument:
    """One argument of task ``name``'s call (``label`` names it in errors); the tasks it refers to are
    added to ``bound.upstream``."""
    if isinstance(value, Task | TaskResult):
        task = value if isinstance(value, Task) else value.task
        if task.target is None:
            raise DagDefinitionError(
                f"{name}(): {label} is the shell task {task.task_id!r}, which returns no value; make it "
                f"upstream with {task.task_id} >> ... instead"
            )
        if task not in bound.upstream:
            bound.upstream.append(task)
        ref = pb.ResultReference(task_id=task.task_id)
        if isinstance(value, TaskResult):
            ref.key = value.key
        return pb.Argument(result=ref)
    if isinstance(value, list | tuple):
        return pb.Argument(
            list=pb.ArgumentList(items=[compile_argument(name, label, v, bound) for v in value])
        )
    if isinstance(value, Mapping):
        fields = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise DagDefinitionError(f"{name}(): {label} has the key {k!r}; JSON object keys are strings")
            fields[k] = compile_argument(name, label, v, bound)
        return pb.Argument(map=pb.ArgumentMap(fields=fields))
    if (
        value is None
        or isinstance(value, bool | int | str)
        or (isinstance(value, float) and math.isfinite(value))
    ):
        literal = struct_pb2.Value()
        if value is None:
            literal.null_value = struct_pb2.NULL_VALUE
        elif isinstance(value, bool):
            literal.bool_value = value
        elif isinstance(value, int | float):
            literal.number_value = value
        else:
            literal.string_value = value
        return pb.Argument(literal=literal)
    function = task_function_name(value)
    hint = (
        f" (the task function itself: call it, {function}(), to pass its result)"
        if function is not None
        else ""
    )
    raise DagDefinitionError(
        f"{name}(): {label} is {value!r} ({type(value).__name__}){hint}: an argument is a task, a key of "
        "a task's result (task['key']) or a JSON value (None, bool, number, string, and lists and dicts "
        "of them)"
    )
