"""Task groups: ``with TaskGroup("extract"):`` and ``@task_group``, as in Airflow.

A group prefixes the ids of the tasks defined in it (``extract.load``; nested groups stack:
``extract.inner.load``) unless ``prefix_group_id=False``, gives them its ``default_args`` over the
enclosing group's (or the DAG's), and can be one end of an edge: ``start >> group`` makes ``start``
upstream of the group's roots (its tasks with no upstream task inside the group), ``group >> end``
makes the group's leaves upstream of ``end``, at the moment the edge is declared. Each task's spec
records its group's path (``TaskSpec.group``) so that clients can show tasks grouped.

Guaranteed: group ids are unique in a DAG (a ``@task_group`` function called again gets
``name__1``, ...); a group changes ids, options and edges only, never how a task runs. Not
supported: mapped (``expand``) groups.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, overload

from schedd_core.errors import InvalidArgument
from schedd_core.identifiers import check_id
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.options import Options
from schedd_sdk.protocols import DagNode, GroupNode, TaskNode, TaskReference

__all__ = ["TaskGroup", "task_group"]

_CURRENT: ContextVar[TaskGroup | None] = ContextVar("schedd_sdk_current_group", default=None)


def current_group(dag: DagNode) -> TaskGroup | None:
    """The innermost group being defined in ``dag``, or None."""
    group = _CURRENT.get()
    return group if group is not None and group.dag is dag else None


def task_defaults(dag: DagNode) -> Options:
    """The options a new task of ``dag`` starts from: the current group's, else the DAG's."""
    group = current_group(dag)
    return group.default_options if group is not None else dag.default_options


def qualified_id(dag: DagNode, task_id: str) -> str:
    """``task_id`` with the prefixes of the groups being defined."""
    group = current_group(dag)
    return group.prefix + task_id if group is not None else task_id


class TaskGroup:
    """A named group of tasks in the DAG being defined; use it as a context manager."""

    def __init__(
        self,
        group_id: str,
        *,
        default_args: Mapping[str, Any] | None = None,
        prefix_group_id: bool = True,
    ) -> None:
        dag = current_dag()
        if dag is None:
            raise DagDefinitionError(f"TaskGroup({group_id!r}) was created outside a DAG definition")
        what = f"TaskGroup({group_id!r})"
        try:
            if not isinstance(group_id, str):
                raise InvalidArgument("group_id", "must be a string")
            check_id("group_id", group_id)
        except InvalidArgument as exc:
            raise DagDefinitionError(f"{what}: {exc}") from None
        if "." in group_id:
            raise DagDefinitionError(f"{what}: a group id cannot contain '.': nest groups instead")
        if default_args is not None and not isinstance(default_args, Mapping):
            raise DagDefinitionError(f"{what}: default_args must be a mapping, got {default_args!r}")
        parent = current_group(dag)
        self.dag = dag
        self.parent: TaskGroup | None = parent
        self.group_id = group_id
        #: Dot-separated ids of the enclosing groups and this one: what ``TaskSpec.group`` records.
        self.path: str = f"{parent.path}.{group_id}" if parent is not None else group_id
        #: What the ids of this group's tasks start with.
        self.prefix: str = (parent.prefix if parent is not None else "") + (
            f"{group_id}." if prefix_group_id else ""
        )
        base = parent.default_options if parent is not None else dag.default_options
        self.default_options: Options = Options.parse(dict(default_args or {}), f"{what}: default_args").over(
            base
        )
        self._tokens: list[Token[TaskGroup | None]] = []
        dag.add_group(self)

    @property
    def tasks(self) -> tuple[TaskNode, ...]:
        """The tasks of this group and of the groups nested in it, in definition order."""
        return tuple(t for t in self.dag.tasks if t.group is not None and _within(t.group, self))

    @property
    def roots(self) -> list[TaskNode]:
        """The group's tasks with no upstream task inside the group."""
        inside = {t.task_id for t in self.tasks}
        return [t for t in self.tasks if not inside & set(t.upstream_ids)]

    @property
    def leaves(self) -> list[TaskNode]:
        """The group's tasks with no downstream task inside the group."""
        inside = {t.task_id for t in self.tasks}
        return [t for t in self.tasks if not inside & set(t.downstream_ids)]

    def ends(self, side: str) -> list[TaskNode]:
        """Its roots when the group is downstream of an edge (``side`` "down"), else its leaves."""
        ends = self.roots if side == "down" else self.leaves
        if not ends:
            raise DagDefinitionError(f"task group {self.path!r} has no tasks to connect an edge to")
        return ends

    def __rshift__(self, other: Any) -> Any:
        """``group >> other``: the group's leaves run before ``other``."""
        for leaf in self.ends("up"):
            leaf >> other
        return other

    def __lshift__(self, other: Any) -> Any:
        """``group << other``: ``other`` runs before the group's roots."""
        for root in self.ends("down"):
            root << other
        return other

    def __rrshift__(self, other: Sequence[Any]) -> TaskGroup:
        """``[a, b] >> group``."""
        for root in self.ends("down"):
            root << other
        return self

    def __rlshift__(self, other: Sequence[Any]) -> TaskGroup:
        """``[a, b] << group``."""
        for leaf in self.ends("up"):
            leaf >> other
        return self

    def __enter__(self) -> TaskGroup:
        self._tokens.append(_CURRENT.set(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _CURRENT.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"<TaskGroup {self.path!r} of DAG {self.dag.dag_id!r}>"


def _within(group: GroupNode, outer: TaskGroup) -> bool:
    node: GroupNode | None = group
    while node is not None:
        if node is outer:
            return True
        node = node.parent
    return False


@overload
def task_group(function: Callable[..., Any], /) -> Callable[..., Any]: ...


@overload
def task_group(
    function: None = None,
    /,
    *,
    group_id: str | None = None,
    default_args: Mapping[str, Any] | None = None,
    prefix_group_id: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def task_group(
    function: Callable[..., Any] | None = None,
    /,
    *,
    group_id: str | None = None,
    default_args: Mapping[str, Any] | None = None,
    prefix_group_id: bool = True,
) -> Callable[..., Any]:
    """``@task_group`` / ``@task_group(group_id=..., default_args=...)``: calling the function in a DAG
    definition runs its body inside a new :class:`TaskGroup` (the function's name unless
    ``group_id``; ``name__1``, ... when called again). The call returns what the body returns when
    that is a task or a task's result (so it can be passed on as an argument), else the group."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise DagDefinitionError(f"@task_group: expected a function, got {fn!r}")

        @functools.wraps(fn)
        def build(*args: Any, **kwargs: Any) -> Any:
            dag = current_dag()
            if dag is None:
                raise DagDefinitionError(
                    f"@task_group {fn.__qualname__}() was called outside a DAG definition"
                )
            base = group_id or fn.__name__
            parent = current_group(dag)
            taken = {g.path for g in dag.groups}
            prefix = f"{parent.path}." if parent is not None else ""
            name, n = base, 0
            while prefix + name in taken:
                n += 1
                name = f"{base}__{n}"
            with TaskGroup(name, default_args=default_args, prefix_group_id=prefix_group_id) as group:
                result = fn(*args, **kwargs)
            return result if isinstance(result, TaskReference) else group

        return build

    if function is None:
        return decorate
    return decorate(function)
