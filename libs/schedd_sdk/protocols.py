"""The shapes by which the SDK's modules know the ones built on them, so that none imports upward.

The modules form layers: the definition context, task groups, tasks, TaskFlow arguments, mapping,
task functions, sensors, the decorators, compilation, the DAG. A lower module that must handle an
object of a higher one (the DAG being defined, a task seen from its group, a ``@task`` function
passed where a task was expected) knows it only by what is declared here.

Guaranteed: the DAG (:class:`~schedd_sdk.dags.DAG`), its tasks (:class:`~schedd_sdk.tasks.Task`)
and groups (:class:`~schedd_sdk.groups.TaskGroup`) satisfy these protocols, as mypy checks where
they are passed as such. Not guaranteed: that any other object satisfying them works in their place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from schedd_sdk.options import Options

__all__ = ["DagNode", "GroupNode", "TaskNode", "TaskReference", "task_function_name"]


class GroupNode(Protocol):
    """A task group, as the tasks and the DAG see it."""

    @property
    def path(self) -> str:
        """Dot-separated ids of the enclosing groups and this one."""
        ...

    @property
    def parent(self) -> GroupNode | None: ...


class TaskNode(Protocol):
    """A task of a DAG, as the DAG and the task groups see it."""

    @property
    def task_id(self) -> str: ...

    @property
    def group(self) -> GroupNode | None: ...

    @property
    def upstream_ids(self) -> tuple[str, ...]: ...

    @property
    def downstream_ids(self) -> tuple[str, ...]: ...

    def __rshift__(self, other: Any) -> Any: ...

    def __lshift__(self, other: Any) -> Any: ...


class DagNode(Protocol):
    """The DAG being defined, as its tasks, groups and task functions see it (what
    :mod:`schedd_sdk.context` holds)."""

    @property
    def dag_id(self) -> str: ...

    @property
    def timezone(self) -> str:
        """The IANA name of the DAG's time zone."""
        ...

    @property
    def default_options(self) -> Options:
        """``default_args`` checked: the base of every task's options."""
        ...

    @property
    def tasks(self) -> Sequence[TaskNode]:
        """The tasks, in definition order."""
        ...

    @property
    def groups(self) -> Sequence[GroupNode]:
        """The task groups, in definition order."""
        ...

    def add_task(self, task: TaskNode) -> None:
        """Register a new task; its id must be new."""
        ...

    def add_group(self, group: GroupNode) -> None:
        """Register a new task group; its path must be new."""
        ...

    def unique_task_id(self, base: str) -> str:
        """``base`` if unused, else ``base__1``, ``base__2``, ..."""
        ...


class TaskReference:
    """The base of what stands for a task in a DAG definition: a task and one key of its result
    (:class:`~schedd_sdk.tasks.Task`, :class:`~schedd_sdk.tasks.TaskResult`), for the modules
    below them that must recognise one."""

    __slots__ = ()


def task_function_name(value: object) -> str | None:
    """The function's name if ``value`` is a ``@task`` function (a
    :class:`~schedd_sdk.task_functions.TaskFunction`, which is marked ``is_task_function``), else None:
    for the error that says to call it rather than pass it."""
    if getattr(type(value), "is_task_function", False) is not True:
        return None
    function = getattr(value, "function", None)
    return str(getattr(function, "__name__", function))
