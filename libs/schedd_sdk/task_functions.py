"""Task functions: what calling a ``@task`` function does (the decorators are :mod:`schedd_sdk.functions`).

Inside a DAG definition, calling a ``@task`` function adds a Python task (:class:`~schedd_sdk.tasks.Task`)
with the call's arguments bound (:mod:`schedd_sdk.arguments`) and returns it.

What a worker passes at run time: the call's arguments, resolved from the stored upstream results,
and, when the function declares them and the call does not give them, the keyword arguments
``params`` (the task's params with the run's conf on top), ``context`` (the run's identity:
``SCHEDD_DAG_ID``, ``SCHEDD_RUN_ID``, ...) and the task context's names (``ds``, ``logical_date``,
``ti``, ``dag_run``...: :mod:`schedd_core.task_context`). Upstream tasks' return values also
reach a task as JSON in ``SCHEDD_UPSTREAM_RESULTS``, keyed by task id
(:func:`schedd_sdk.upstream_results`).
``multiple_outputs=True`` (implied by a ``dict`` return annotation, as in Airflow) makes the task
fail unless it returns a dict with string keys.

Outside a DAG definition a ``@task`` function is the plain function: calling it runs it. That
is how workers call it (they import ``module:qualname``, which is the decorated object) and how
it can be unit-tested. ``.function`` is the undecorated function.

``fn.partial(...).expand(...)`` and ``fn.expand(...)`` add a mapped task (:mod:`schedd_sdk.mapping`).

Task ids: a ``@task`` function's id is its name (or ``task_id=``), with the prefixes of the task
groups it is called in; calling it again in one DAG gives ``name__1``, ``name__2``, ... as in Airflow.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, Unpack

from schedd.v1 import resources_pb2 as pb
from schedd_sdk.arguments import BoundArguments, bind
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.groups import qualified_id, task_defaults
from schedd_sdk.mapping import PartialTask, partial_task
from schedd_sdk.options import Options, TaskOptions
from schedd_sdk.protocols import DagNode
from schedd_sdk.targets import import_path
from schedd_sdk.tasks import Task, _check_task_id

__all__ = ["TaskFunction"]

_F = TypeVar("_F", bound=Callable[..., Any])


class TaskFunction(Generic[_F]):
    """A function decorated with ``@task``: inside a DAG definition, calling it adds a task.

    Outside a DAG definition, calling it calls the function (that is what workers do).
    """

    #: Marks a task function for the modules below this one (:func:`schedd_sdk.protocols.task_function_name`).
    is_task_function = True
    #: How its tasks poke, for a sensor function (:class:`schedd_sdk.sensors.SensorFunction`); None here.
    sensor: pb.SensorSpec | None = None
    function: _F
    __name__: str
    __qualname__: str
    __wrapped__: _F

    def __init__(
        self,
        function: _F,
        *,
        task_id: str | None,
        options: Options,
        branch: bool,
        multiple_outputs: bool | None = None,
        role: str | None = None,
    ) -> None:
        self.function = function
        self.task_id = task_id
        self.options = options
        self.branch = branch
        #: The function must return a dict with string keys (given, or inferred from a ``dict`` return
        #: annotation as Airflow does).
        self.multiple_outputs = _returns_mapping(function) if multiple_outputs is None else multiple_outputs
        #: "setup", "teardown" or None (``schedd_sdk.setup_teardown``).
        self.role = role
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """In a DAG definition: add this task, its arguments bound (the tasks among them upstream of
        it), and return it. Otherwise: call the function (what a worker does)."""
        dag = current_dag()
        if dag is None:
            result = self.function(*args, **kwargs)
            if self.multiple_outputs and not inspect.isawaitable(result):
                _check_outputs(self.function.__qualname__, result)
            return result
        return self.add_task(dag, bind(self.default_task_id, self.function, args, kwargs))

    @property
    def default_task_id(self) -> str:
        """The id its tasks get (before a group's prefix and ``__1``, ``__2``, ...)."""
        return self.task_id or self.function.__name__

    def add_task(self, dag: DagNode, bound: BoundArguments, *, mapping: pb.TaskMapping | None = None) -> Task:
        """Add a task of this function to ``dag`` with arguments ``bound`` (the tasks they refer to
        upstream of it); ``mapping`` makes it a mapped task."""
        target = import_path(self.function, what="task function", accept=(self,))
        node = Task(
            dag,
            dag.unique_task_id(qualified_id(dag, self.default_task_id)),
            options=self.options.over(task_defaults(dag)),
            target=target,
            branch=self.branch,
            arguments=None if bound.empty else bound,
            mapping=mapping,
        )
        for up in bound.upstream:
            Task._connect(up, node)
        if self.role == "setup":
            node.as_setup()
        elif self.role == "teardown":
            node.as_teardown()
        return node

    def partial(self, **kwargs: Any) -> PartialTask:
        """Airflow's ``partial``: the constant arguments of a mapped task (and options: ``task_id``
        and task options that are not parameters of the function), to ``.expand(...)`` over the
        others (:mod:`schedd_sdk.mapping`)."""
        return partial_task(self, kwargs)

    def expand(self, **lists: Any) -> Task:
        """Airflow's ``expand``: add a mapped task, one instance per element of the lists (per
        combination, for several) at run time; ``fn.expand(...)`` is ``fn.partial().expand(...)``."""
        return partial_task(self, {}).expand(**lists)

    def override(self, *, task_id: str | None = None, **options: Unpack[TaskOptions]) -> TaskFunction[_F]:
        """This task function with some options replaced, for one call: ``load.override(retries=5)()``."""
        what = f"{self.function.__qualname__}.override"
        if task_id is not None:
            _check_task_id(task_id, what)
        return TaskFunction(
            self.function,
            task_id=task_id or self.task_id,
            options=Options.parse(options, what).over(self.options),
            branch=self.branch,
            multiple_outputs=self.multiple_outputs,
            role=self.role,
        )

    def __repr__(self) -> str:
        kind = "@task.branch" if self.branch else f"@{self.role}" if self.role else "@task"
        return f"<{kind} {self.function.__module__}.{self.function.__qualname__}>"


def _returns_mapping(function: Callable[..., Any]) -> bool:
    try:
        hint = typing.get_type_hints(function).get("return")
    except Exception:  # an annotation that does not resolve here: no inference, as in Airflow
        return False
    origin = typing.get_origin(hint) or hint
    return inspect.isclass(origin) and issubclass(origin, Mapping)


def _check_outputs(name: str, result: object) -> None:
    if not isinstance(result, Mapping) or not all(isinstance(k, str) for k in result):
        raise TypeError(
            f"{name} has multiple_outputs, so it must return a dict with string keys; it returned "
            f"{type(result).__name__}"
        )


def _check_function(function: object, what: str) -> None:
    if not callable(function) or not hasattr(function, "__qualname__"):
        raise DagDefinitionError(f"{what}: expected a function, got {function!r}")
    qualname = str(function.__qualname__)
    if "<lambda>" in qualname or "<locals>" in qualname:
        import_path(function, what="task function")  # raises the explanatory error
