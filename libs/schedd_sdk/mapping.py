"""Dynamic task mapping, as Airflow's ``partial().expand()``: one task, as many instances as elements.

Inside a DAG definition::

    files = list_files()
    sizes = measure.partial(unit="kB").expand(path=files)  # one instance per file listed at run time
    scaled = scale.expand(factor=[1, 10, 100])              # one per element of a literal list
    report(sizes)                                           # gets the list of every instance's result

``fn.partial(**constants)`` fixes some keyword arguments of a ``@task`` function (they are compiled
like a call's arguments: JSON literals, tasks, ``task["key"]``); ``.expand(**lists)`` adds the task,
which the scheduler expands when it is ready to run into one task instance per element of each list
(per combination of elements, for several lists: the last varies fastest), each called with its
elements as those keyword arguments. ``fn.expand(...)`` is ``fn.partial().expand(...)``.

A list to expand over is a list or tuple of JSON values (``TaskMapping`` literal), or the result of a
Python task, or one key of it (a result reference, which makes that task upstream); it must be a
list when the task is expanded, else the task fails. A list with no elements skips the task. Passing
the mapped task on (``report(sizes)``) gives the receiving task the list of its instances' results,
in map index order (None for an instance that returned nothing).

Options: ``partial`` also takes ``task_id`` and the task options (``retries``, ``pool``, ...) of
``@task(...)`` / ``.override(...)``, as Airflow's ``partial`` takes operator options; a keyword that
is a named parameter of the function is an argument, never an option (with ``**kwargs``, an option
name is still an option: pass such an argument with ``expand`` or through ``.override()``).

Refused where the mistake is made (:class:`~schedd_sdk.errors.DagDefinitionError`): mapping a
branch, sensor, setup or teardown task; ``expand()`` with no arguments; a name the function has no
keyword parameter for (unless it takes ``**kwargs``); a name given to both ``partial`` and ``expand``;
``params`` or ``context`` (the worker passes those); a value that is not a list literal or a task's
result (a dict, a string, a number); a list holding a non-JSON value; and arguments that leave a
required parameter unset. ``depends_on_past`` on a mapped task is refused by the validator.
Not supported: Airflow's ``expand_kwargs``, ``.map()`` and ``.zip()`` of results, and expanding over
a dict's items.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Unpack

from schedd.v1 import resources_pb2 as pb
from schedd_sdk.arguments import WORKER_PASSED, BoundArguments, TaskResult, bind, compile_argument
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.options import OPTION_NAMES, TaskOptions, to_list_value
from schedd_sdk.protocols import DagNode, task_function_name
from schedd_sdk.tasks import Task

__all__ = ["MappableFunction", "PartialTask", "partial_task"]


class MappableFunction(Protocol):
    """A ``@task`` function (:class:`~schedd_sdk.task_functions.TaskFunction`), as mapping uses it."""

    @property
    def function(self) -> Callable[..., Any]:
        """The undecorated function."""
        ...

    @property
    def default_task_id(self) -> str: ...

    @property
    def branch(self) -> bool: ...

    @property
    def role(self) -> str | None:
        """The role: "setup", "teardown" or None."""
        ...

    @property
    def sensor(self) -> pb.SensorSpec | None:
        """How its tasks poke, for a sensor function; None for any other."""
        ...

    def override(self, *, task_id: str | None = None, **options: Unpack[TaskOptions]) -> MappableFunction: ...

    def add_task(
        self, dag: DagNode, bound: BoundArguments, *, mapping: pb.TaskMapping | None = None
    ) -> Task: ...


def partial_task(function: MappableFunction, kwargs: Mapping[str, Any]) -> PartialTask:
    """``function.partial(**kwargs)``: the task options among ``kwargs`` applied (as ``.override``
    would), the other keywords kept as the constant arguments."""
    what = f"{function.function.__qualname__}.partial()"
    _check_mappable(function, what)
    named = _keyword_parameters(function.function)[0]
    options = {k: v for k, v in kwargs.items() if k not in named and (k in OPTION_NAMES or k == "task_id")}
    if options:
        function = function.override(**options)
    return PartialTask(function, {k: v for k, v in kwargs.items() if k not in options})


class PartialTask:
    """A ``@task`` function with some constant arguments, waiting for ``.expand(...)``.

    Not a task: nothing is added to a DAG until ``expand`` is called (once per mapped task; calling
    it again adds another task, ``name__1``)."""

    def __init__(self, function: MappableFunction, constants: Mapping[str, Any]) -> None:
        self.function = function
        self.constants = dict(constants)

    def expand(self, **lists: Any) -> Task:
        """Add the mapped task to the DAG being defined, expanding over ``lists`` (keyword name to a
        list literal or a task's result); returns it, to pass on or connect like any task."""
        name = self.function.default_task_id
        what = f"{name}.expand()"
        dag = current_dag()
        if dag is None:
            raise DagDefinitionError(
                f"{what} was called outside a DAG definition: call it inside a @dag function or a "
                "`with DAG(...)` block"
            )
        if not lists:
            raise DagDefinitionError(
                f"{what}: name at least one argument to expand over, as in expand(x=[1, 2, 3])"
            )
        self._check_names(what, lists)
        bound = bind(name, self.function.function, (), self.constants, expanded=lists)
        mapping = pb.TaskMapping(
            expand=[
                pb.MappedArgument(name=key, values=_values(name, what, key, value, bound))
                for key, value in lists.items()
            ]
        )
        return self.function.add_task(dag, bound, mapping=mapping)

    def _check_names(self, what: str, lists: Mapping[str, Any]) -> None:
        function = self.function.function
        named, takes_kwargs = _keyword_parameters(function)
        for key in lists:
            if key in self.constants:
                raise DagDefinitionError(
                    f"{what}: {key} is given to both partial() and expand(); an argument is either "
                    "constant or expanded"
                )
            if key in WORKER_PASSED and (key in named or takes_kwargs):
                raise DagDefinitionError(f"{what}: {key} is passed by the worker; it cannot be expanded")
            if key not in named and not takes_kwargs:
                raise DagDefinitionError(
                    f"{what}: {key} is not a keyword parameter of {function.__qualname__}() (those are: "
                    f"{', '.join(named) or 'none'}); only they can be expanded"
                )

    def __repr__(self) -> str:
        return f"<partial {self.function!r} {sorted(self.constants)}>"


def _check_mappable(function: MappableFunction, what: str) -> None:
    kind = (
        "a sensor"
        if function.sensor is not None
        else "a branch task"
        if function.branch
        else f"a {function.role} task"
        if function.role
        else None
    )
    if kind is not None:
        raise DagDefinitionError(f"{what}: {kind} cannot be mapped")


def _keyword_parameters(function: Any) -> tuple[tuple[str, ...], bool]:
    """The names of the parameters ``function`` takes by keyword, in order, and whether it takes
    ``**kwargs`` (anything, for a callable without a signature)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return (), True
    keywordable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = tuple(p.name for p in parameters if p.kind in keywordable)
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _values(name: str, what: str, key: str, value: object, bound: BoundArguments) -> pb.Argument:
    """The list argument ``key`` expands over: a task's result (added upstream) or a literal list."""
    if isinstance(value, Task | TaskResult):
        return compile_argument(name, f"argument {key}=", value, bound)
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if isinstance(item, Task | TaskResult):
                raise DagDefinitionError(
                    f"{what}: element {i} of {key}= is {item!r}, a task's result; a literal list holds "
                    f"JSON values only: to expand over a task's result, pass it as {key}= itself"
                )
        try:
            return pb.Argument(literal=to_list_value(value))
        except (TypeError, ValueError) as exc:
            raise DagDefinitionError(f"{what}: {key}= must hold JSON values: {exc}") from None
    function = task_function_name(value)
    hint = (
        f" (the task function itself: call it, {function}(), to expand over its result)"
        if function is not None
        else ""
    )
    kind = type(value).__name__
    raise DagDefinitionError(
        f"{what}: cannot expand {key}={value!r}: {'an' if kind[0] in 'aeiou' else 'a'} {kind} is not a "
        f"list{hint}; expand over a list or tuple literal, or a task's result (a task, or task['key'])"
    )
