"""Tasks: the nodes of a DAG, ``shell``, edges, and setup/teardown roles.

Inside a DAG definition (a ``@dag`` function's body or a ``with DAG(...)`` block):

* calling a ``@task`` function (``extract()``, :mod:`schedd_sdk.functions`) adds a Python task that
  runs the function on a worker, named by its import path ``module:qualname``, and returns the
  :class:`Task`;
* ``shell("cmd", task_id="x")`` adds a shell task;
* ``a >> b``, ``b << a``, ``a >> [b, c]``, ``[a, b] >> c``, ``a >> b >> c`` and
  :func:`chain` declare edges (``a`` runs before ``b``);
* passing tasks as arguments, ``load(transform(extract()))``, passes their return values at run
  time and declares the edges, as Airflow's TaskFlow does (:mod:`schedd_sdk.arguments`);
  ``task["key"]`` passes one key of a task's dict result; other arguments are JSON literals;
* ``.as_setup()`` / ``.as_teardown(setups=...)`` (and ``@setup`` / ``@teardown``) make setup and
  teardown tasks (:mod:`schedd_sdk.setup_teardown`).
* ``fn.partial(...).expand(name=values)`` adds a mapped task, one task instance per element at run
  time (:mod:`schedd_sdk.mapping`).

Task ids, with the prefix of the task group they are defined in (:mod:`schedd_sdk.groups`): a
``@task`` function's id is its name (or ``task_id=``), then ``name__1``, ``name__2``, ... when it is
called again in one DAG, as in Airflow. A shell task's id is required and must be unique in its DAG.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any, TypeVar, Unpack

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.identifiers import check_id
from schedd_core.triggers import TriggerRule
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.groups import TaskGroup, current_group, qualified_id, task_defaults
from schedd_sdk.options import Options, TaskOptions
from schedd_sdk.protocols import DagNode, TaskReference, task_function_name

__all__ = ["BoundArguments", "Task", "TaskResult", "chain", "shell"]

_Target = TypeVar("_Target", bound="Task | TaskGroup | TaskResult | Sequence[Task | TaskGroup | TaskResult]")


class Task(TaskReference):
    """One task of a DAG: its id, its action, its options and its upstream tasks.

    Created by calling a ``@task`` function or :func:`shell` inside a DAG definition; never
    directly. ``options`` are the task's own options over the DAG's ``default_args``.
    """

    def __init__(
        self,
        dag: DagNode,
        task_id: str,
        *,
        options: Options,
        command: str | None = None,
        target: str | None = None,
        branch: bool = False,
        arguments: BoundArguments | None = None,
        mapping: pb.TaskMapping | None = None,
    ) -> None:
        self.dag = dag
        self.task_id = task_id
        self.options = options
        #: The shell command, or None for a Python task.
        self.command = command
        #: ``module:qualname`` of a Python task, or None for a shell task.
        self.target = target
        self.branch = branch
        #: The compiled arguments of a Python task's call, if it has any.
        self.arguments = arguments
        #: For a mapped task (``.partial(...).expand(...)``, :mod:`schedd_sdk.mapping`): what it expands
        #: over; None for any other task.
        self.mapping = mapping
        #: The innermost task group it was defined in.
        self.group = current_group(dag)
        self.setup = False
        self.teardown = False
        #: How a sensor task pokes (``schedd_sdk.sensors``); None for any other task.
        self.sensor: pb.SensorSpec | None = None
        self._upstream: dict[str, Task] = {}
        self._downstream: dict[str, Task] = {}
        dag.add_task(self)

    def __getitem__(self, key: str) -> TaskResult:
        """``task["key"]``: one key of this task's return value (a dict), to pass to another task."""
        if not isinstance(key, str):
            raise DagDefinitionError(f"{self.task_id}[{key!r}]: a result key is a string (a JSON object key)")
        if self.target is None:
            raise DagDefinitionError(
                f"{self.task_id}[{key!r}]: the shell task {self.task_id!r} returns no value"
            )
        if self.mapping is not None:
            raise DagDefinitionError(
                f"{self.task_id}[{key!r}]: {self.task_id!r} is a mapped task, whose result is the list of "
                f"its instances' results; pass {self.task_id} itself and pick the key in the task that "
                "gets the list"
            )
        return TaskResult(self, key)

    def as_setup(self) -> Task:
        """Make this task a setup task (Airflow's ``as_setup``); returns it."""
        if self.teardown:
            raise DagDefinitionError(f"task {self.task_id!r} is a teardown; it cannot also be a setup")
        self.setup = True
        return self

    def as_teardown(self, *, setups: Task | Sequence[Task] | None = None) -> Task:
        """Make this task a teardown (trigger rule ``all_done_setup_success``) of ``setups``, which
        become setup tasks upstream of it (Airflow's ``as_teardown``); returns it."""
        if self.setup:
            raise DagDefinitionError(f"task {self.task_id!r} is a setup; it cannot also be a teardown")
        self.teardown = True
        self.options = dataclasses.replace(self.options, trigger_rule=TriggerRule.ALL_DONE_SETUP_SUCCESS)
        for up in _tasks_of(setups, "as_teardown(setups=...)", "up") if setups is not None else []:
            up.as_setup()
            self._connect(up, self)
        return self

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
        for up in _tasks_of(other, "set_upstream", "up"):
            self._connect(up, self)

    def set_downstream(self, other: Task | Sequence[Task]) -> None:
        """Make ``other`` (a task or tasks) run after this task."""
        for down in _tasks_of(other, "set_downstream", "down"):
            self._connect(self, down)

    def __rshift__(self, other: _Target) -> _Target:
        """``self >> other``: ``other`` runs after this task; returns ``other`` for chaining."""
        for down in _tasks_of(other, ">>", "down"):
            self._connect(self, down)
        return other

    def __lshift__(self, other: _Target) -> _Target:
        """``self << other``: ``other`` runs before this task; returns ``other``."""
        for up in _tasks_of(other, "<<", "up"):
            self._connect(up, self)
        return other

    def __rrshift__(self, other: Sequence[Task | TaskGroup | TaskResult]) -> Task:
        """``[a, b] >> self``."""
        for up in _tasks_of(other, ">>", "up"):
            self._connect(up, self)
        return self

    def __rlshift__(self, other: Sequence[Task | TaskGroup | TaskResult]) -> Task:
        """``[a, b] << self``."""
        for down in _tasks_of(other, "<<", "down"):
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
        kind = "shell" if self.command is not None else "python, mapped" if self.mapping else "python"
        return f"<Task {self.task_id!r} ({kind}) of DAG {self.dag.dag_id!r}>"


class TaskResult(TaskReference):
    """``task["key"]``: one key of a task's return value (a JSON object), as an argument of a later
    task. It can also make edges (``task["key"] >> other`` is ``task >> other``)."""

    def __init__(self, task: Task, key: str) -> None:
        self.task = task
        self.key = key

    def __rshift__(self, other: Any) -> Any:
        return self.task >> other

    def __lshift__(self, other: Any) -> Any:
        return self.task << other

    def __repr__(self) -> str:
        return f"{self.task.task_id}[{self.key!r}]"


class BoundArguments:
    """A task call's arguments, compiled (:func:`schedd_sdk.arguments.bind`), and the tasks they refer
    to (in order, each once)."""

    def __init__(self) -> None:
        self.args: list[pb.Argument] = []
        self.kwargs: dict[str, pb.Argument] = {}
        self.upstream: list[Task] = []

    @property
    def empty(self) -> bool:
        return not self.args and not self.kwargs


def _tasks_of(value: object, op: str, side: str) -> list[Task]:
    """The tasks ``value`` stands for on one side of an edge: a task (or a key of its result) is
    itself; a group is its roots downstream of an edge (``side`` "down") and its leaves upstream."""
    if isinstance(value, Task):
        return [value]
    if isinstance(value, TaskResult):
        return [value.task]
    if isinstance(value, TaskGroup):  # every task of a DAG is a Task
        return [task for task in value.ends(side) if isinstance(task, Task)]
    if isinstance(value, Sequence) and not isinstance(value, str):
        found: list[Task] = []
        for item in value:
            if not isinstance(item, Task | TaskResult | TaskGroup):
                value = item
                break
            found += _tasks_of(item, op, side)
        else:
            return found
    function = task_function_name(value)
    hint = f": call it, {function}(), to get its task" if function is not None else ""
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
        lefts, rights = _tasks_of(left, "chain", "up"), _tasks_of(right, "chain", "down")
        if len(lefts) != len(rights):
            raise DagDefinitionError(
                f"chain: adjacent lists must have the same length to be connected pairwise, got "
                f"{len(lefts)} and {len(rights)}"
            )
        for up, down in zip(lefts, rights, strict=True):
            up >> down


def _require_dag(what: str) -> DagNode:
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
    return Task(dag, qualified_id(dag, task_id), options=own.over(task_defaults(dag)), command=command)
