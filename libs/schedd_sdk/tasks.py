"""Tasks: the nodes of a DAG, the ``@task`` decorator, ``shell`` and edges.

Inside a DAG definition (a ``@dag`` function's body or a ``with DAG(...)`` block):

* calling a ``@task`` function (``extract()``) adds a Python task that runs the function on a
  worker, named by its import path ``module:qualname``, and returns the :class:`Task`;
* ``shell("cmd", task_id="x")`` adds a shell task;
* ``a >> b``, ``b << a``, ``a >> [b, c]``, ``[a, b] >> c``, ``a >> b >> c`` and
  :func:`chain` declare edges (``a`` runs before ``b``);
* passing tasks as arguments, ``load(transform(extract()))``, declares the same edges as
  Airflow's TaskFlow does.

What is and is not passed at run time: **the arguments of a call are not passed to the function.**
They only declare dependencies. Workers call a task function with, when it declares them, the
keyword arguments ``params`` (the task's params with the run's conf on top) and ``context`` (the
run's identity: ``SCHEDD_DAG_ID``, ``SCHEDD_RUN_ID``, ...). Upstream tasks' return values reach a
task as JSON in ``SCHEDD_UPSTREAM_RESULTS``, keyed by task id; read them with
:func:`schedd_sdk.upstream_results`. Any argument that is not a task is therefore rejected; pass
constants as ``params``. For the same reason a task function's parameters other than ``params``
and ``context`` must have defaults.

Outside a DAG definition a ``@task`` function is the plain function: calling it runs it. That
is how workers call it (they import ``module:qualname``, which is the decorated object) and how
it can be unit-tested. ``.function`` is the undecorated function.

Task ids: a ``@task`` function's id is its name (or ``task_id=``); calling it again in one DAG
gives ``name__1``, ``name__2``, ... as in Airflow. A shell task's id is required and must be
unique in its DAG.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Unpack, overload

from schedd_core.errors import InvalidArgument
from schedd_core.spec import check_id
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.options import Options, TaskOptions
from schedd_sdk.targets import import_path

if TYPE_CHECKING:
    from schedd_sdk.dags import DAG

__all__ = ["Task", "TaskFunction", "chain", "shell", "task"]

_F = TypeVar("_F", bound=Callable[..., Any])
_Target = TypeVar("_Target", bound="Task | Sequence[Task]")

#: Keyword arguments a worker passes to a task function that declares them.
RUNTIME_ARGUMENTS = ("params", "context")


class Task:
    """One task of a DAG: its id, its action, its options and its upstream tasks.

    Created by calling a ``@task`` function or :func:`shell` inside a DAG definition; never
    directly. ``options`` are the task's own options over the DAG's ``default_args``.
    """

    def __init__(
        self,
        dag: DAG,
        task_id: str,
        *,
        options: Options,
        command: str | None = None,
        target: str | None = None,
        branch: bool = False,
    ) -> None:
        self.dag = dag
        self.task_id = task_id
        self.options = options
        #: The shell command, or None for a Python task.
        self.command = command
        #: ``module:qualname`` of a Python task, or None for a shell task.
        self.target = target
        self.branch = branch
        self._upstream: dict[str, Task] = {}
        self._downstream: dict[str, Task] = {}
        dag.add_task(self)

    @property
    def upstream_ids(self) -> tuple[str, ...]:
        """Ids of the direct upstream tasks, in the order the edges were declared."""
        return tuple(self._upstream)

    @property
    def downstream_ids(self) -> tuple[str, ...]:
        """Ids of the direct downstream tasks, in the order the edges were declared."""
        return tuple(self._downstream)

    def set_upstream(self, other: Task | Sequence[Task]) -> None:
        """Make ``other`` (a task or tasks) run before this task."""
        for up in _tasks_of(other, "set_upstream"):
            self._connect(up, self)

    def set_downstream(self, other: Task | Sequence[Task]) -> None:
        """Make ``other`` (a task or tasks) run after this task."""
        for down in _tasks_of(other, "set_downstream"):
            self._connect(self, down)

    def __rshift__(self, other: _Target) -> _Target:
        """``self >> other``: ``other`` runs after this task; returns ``other`` for chaining."""
        for down in _tasks_of(other, ">>"):
            self._connect(self, down)
        return other

    def __lshift__(self, other: _Target) -> _Target:
        """``self << other``: ``other`` runs before this task; returns ``other``."""
        for up in _tasks_of(other, "<<"):
            self._connect(up, self)
        return other

    def __rrshift__(self, other: Sequence[Task]) -> Task:
        """``[a, b] >> self``."""
        for up in _tasks_of(other, ">>"):
            self._connect(up, self)
        return self

    def __rlshift__(self, other: Sequence[Task]) -> Task:
        """``[a, b] << self``."""
        for down in _tasks_of(other, "<<"):
            self._connect(self, down)
        return self

    @staticmethod
    def _connect(up: Task, down: Task) -> None:
        if up.dag is not down.dag:
            raise DagDefinitionError(
                f"cannot make {up.task_id!r} (DAG {up.dag.dag_id!r}) upstream of {down.task_id!r} "
                f"(DAG {down.dag.dag_id!r}): edges connect tasks of one DAG"
            )
        if up is down:
            raise DagDefinitionError(f"task {up.task_id!r} cannot depend on itself")
        down._upstream[up.task_id] = up
        up._downstream[down.task_id] = down

    def __repr__(self) -> str:
        kind = "shell" if self.command is not None else "python"
        return f"<Task {self.task_id!r} ({kind}) of DAG {self.dag.dag_id!r}>"


def _tasks_of(value: object, op: str) -> list[Task]:
    if isinstance(value, Task):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = list(value)
        bad = [item for item in items if not isinstance(item, Task)]
        if not bad:
            return items
        value = bad[0]
    hint = (
        f": call it, {value.function.__name__}(), to get its task" if isinstance(value, TaskFunction) else ""
    )
    raise DagDefinitionError(
        f"{op} needs a task or a list of tasks, got {value!r} ({type(value).__name__}){hint}"
    )


def chain(*steps: Task | Sequence[Task]) -> None:
    """``chain(a, [b, c], d)`` is ``a >> [b, c] >> d``; two adjacent lists of the same length are
    connected pairwise (``chain([a, b], [c, d])`` is ``a >> c`` and ``b >> d``), as in Airflow."""
    for left, right in itertools.pairwise(steps):
        if isinstance(left, Task):
            left >> right
            continue
        if isinstance(right, Task):
            right << left
            continue
        lefts, rights = _tasks_of(left, "chain"), _tasks_of(right, "chain")
        if len(lefts) != len(rights):
            raise DagDefinitionError(
                f"chain: adjacent lists must have the same length to be connected pairwise, got "
                f"{len(lefts)} and {len(rights)}"
            )
        for up, down in zip(lefts, rights, strict=True):
            up >> down


def _require_dag(what: str) -> DAG:
    dag = current_dag()
    if dag is None:
        raise DagDefinitionError(
            f"{what} was called outside a DAG definition: call it inside a @dag function or a "
            "`with DAG(...)` block"
        )
    return dag


def _check_task_id(task_id: object, what: str) -> str:
    if not isinstance(task_id, str):
        raise DagDefinitionError(f"{what}: task_id must be a string, got {task_id!r}")
    try:
        check_id("task_id", task_id)
    except InvalidArgument as exc:
        raise DagDefinitionError(f"{what}: {exc}") from None
    return task_id


def shell(command: str, *, task_id: str, **options: Unpack[TaskOptions]) -> Task:
    """Add a task running ``command`` with ``/bin/sh -c`` to the DAG being defined.

    ``task_id`` is required and must be unique in the DAG. The command's exit status decides
    success; its output is the task's log.
    """
    dag = _require_dag(f"shell(task_id={task_id!r})")
    what = f"shell task {task_id!r}"
    _check_task_id(task_id, what)
    if not isinstance(command, str):
        raise DagDefinitionError(f"{what}: the command must be a string, got {command!r}")
    own = Options.parse(options, what)
    return Task(dag, task_id, options=own.over(dag.default_options), command=command)


class TaskFunction(Generic[_F]):
    """A function decorated with ``@task``: inside a DAG definition, calling it adds a task.

    Outside a DAG definition, calling it calls the function (that is what workers do).
    """

    function: _F
    __name__: str
    __qualname__: str
    __wrapped__: _F

    def __init__(self, function: _F, *, task_id: str | None, options: Options, branch: bool) -> None:
        self.function = function
        self.task_id = task_id
        self.options = options
        self.branch = branch
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """In a DAG definition: add this task, upstream of it the tasks among the arguments, and
        return it. Otherwise: call the function."""
        dag = current_dag()
        if dag is None:
            return self.function(*args, **kwargs)
        name = self.task_id or self.function.__name__
        upstream = _argument_tasks(name, args, kwargs)
        target = import_path(self.function, what="task function", accept=(self,))
        node = Task(
            dag,
            dag.unique_task_id(name),
            options=self.options.over(dag.default_options),
            target=target,
            branch=self.branch,
        )
        for up in upstream:
            Task._connect(up, node)
        return node

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
        )

    def __repr__(self) -> str:
        kind = "@task.branch" if self.branch else "@task"
        return f"<{kind} {self.function.__module__}.{self.function.__qualname__}>"


def _argument_tasks(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Task]:
    found: list[Task] = []
    labelled: list[tuple[str, object]] = [(f"argument {i + 1}", a) for i, a in enumerate(args)]
    labelled += [(f"argument {k}=", v) for k, v in kwargs.items()]
    for label, value in labelled:
        _collect(name, label, value, found)
    return found


def _collect(name: str, label: str, value: object, found: list[Task]) -> None:
    if isinstance(value, Task):
        if value not in found:
            found.append(value)
        return
    if isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect(name, label, item, found)
        return
    if isinstance(value, Mapping):
        for item in value.values():
            _collect(name, label, item, found)
        return
    hint = (
        f" (the task function itself: call it, {value.function.__name__}(), to use its task)"
        if isinstance(value, TaskFunction)
        else ""
    )
    raise DagDefinitionError(
        f"{name}(): {label} is {value!r} ({type(value).__name__}){hint}, not a task. Arguments of a task "
        "call only declare dependencies (load(extract()) runs extract before load); schedd does not pass "
        "them to the function at run time. Pass constants as params (@task(params={...}) or "
        f"{name}.override(params={{...}})) and declare a `params` argument to receive them; read upstream "
        "results with schedd_sdk.upstream_results()"
    )


def _check_function(function: object, what: str) -> None:
    if not callable(function) or not hasattr(function, "__qualname__"):
        raise DagDefinitionError(f"{what}: expected a function, got {function!r}")
    qualname = str(function.__qualname__)
    if "<lambda>" in qualname or "<locals>" in qualname:
        import_path(function, what="task function")  # raises the explanatory error
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return
    for p in parameters:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        if p.name in RUNTIME_ARGUMENTS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        raise DagDefinitionError(
            f"{what}: parameter {p.name!r} has no default, but workers call a task function with only "
            "`params` and `context` (when it declares them), never with the arguments of the call in the "
            f"DAG. Give {p.name!r} a default, or drop it and read upstream results with "
            "schedd_sdk.upstream_results()"
        )


class _TaskDecorator:
    """``@task``, ``@task(...)``, ``@task.branch`` and ``@task.branch(...)``."""

    @overload
    def __call__(self, function: _F, /) -> TaskFunction[_F]: ...

    @overload
    def __call__(
        self, function: None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
    ) -> Callable[[_F], TaskFunction[_F]]: ...

    def __call__(
        self, function: _F | None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
    ) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
        """Make a top-level function a task: ``@task`` or ``@task(retries=3, ...)``.

        See :class:`~schedd_sdk.options.TaskOptions` for the options and their defaults.
        """
        return self._decorate(function, task_id, options, branch=False)

    @overload
    def branch(self, function: _F, /) -> TaskFunction[_F]: ...

    @overload
    def branch(
        self, function: None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
    ) -> Callable[[_F], TaskFunction[_F]]: ...

    def branch(
        self, function: _F | None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
    ) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
        """A branch task: the function returns the id (or a list of ids) of the direct downstream
        tasks to follow; the other direct downstream tasks are skipped."""
        return self._decorate(function, task_id, options, branch=True)

    @staticmethod
    def _decorate(
        function: _F | None, task_id: str | None, raw: TaskOptions, *, branch: bool
    ) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
        kind = "@task.branch" if branch else "@task"
        if task_id is not None:
            _check_task_id(task_id, kind)
        options = Options.parse(raw, kind)

        def decorate(fn: _F) -> TaskFunction[_F]:
            if isinstance(fn, TaskFunction):
                raise DagDefinitionError(f"{kind}: {fn!r} is already a task function")
            _check_function(fn, f"{kind} {getattr(fn, '__qualname__', fn)!r}")
            return TaskFunction(fn, task_id=task_id, options=options, branch=branch)

        if function is None:
            return decorate
        return decorate(function)


task = _TaskDecorator()
