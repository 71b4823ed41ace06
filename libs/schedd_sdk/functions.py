"""The ``@task`` decorators: ``@task``, ``@task(...)``, ``@task.branch`` and ``@task.sensor``.

A decorated function is a :class:`~schedd_sdk.task_functions.TaskFunction` (exported here too), which
says what calling it does; ``@task.sensor`` is :data:`schedd_sdk.sensors.sensor`. The options are
checked when the decorator is applied, the function when it comes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, Unpack, overload

from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.options import Options, TaskOptions
from schedd_sdk.sensors import SensorDecorator, sensor
from schedd_sdk.task_functions import TaskFunction, _check_function
from schedd_sdk.tasks import _check_task_id

__all__ = ["TaskFunction", "decorate_task", "task"]

_F = TypeVar("_F", bound=Callable[..., Any])


class _TaskDecorator:
    """``@task``, ``@task(...)``, ``@task.branch`` and ``@task.branch(...)``."""

    @overload
    def __call__(self, function: _F, /) -> TaskFunction[_F]: ...

    @overload
    def __call__(
        self,
        function: None = None,
        /,
        *,
        task_id: str | None = None,
        multiple_outputs: bool | None = None,
        **options: Unpack[TaskOptions],
    ) -> Callable[[_F], TaskFunction[_F]]: ...

    def __call__(
        self,
        function: _F | None = None,
        /,
        *,
        task_id: str | None = None,
        multiple_outputs: bool | None = None,
        **options: Unpack[TaskOptions],
    ) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
        """Make a top-level function a task: ``@task`` or ``@task(retries=3, ...)``.

        See :class:`~schedd_sdk.options.TaskOptions` for the options and their defaults.
        """
        return decorate_task(function, task_id, options, "@task", multiple_outputs=multiple_outputs)

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
        return decorate_task(function, task_id, options, "@task.branch", branch=True, multiple_outputs=False)

    @property
    def sensor(self) -> SensorDecorator:
        """``@task.sensor`` or ``@task.sensor(poke_interval=..., timeout=..., mode=..., soft_fail=...)``:
        a task that pokes until its condition holds (see :mod:`schedd_sdk.sensors`)."""
        return sensor


def decorate_task(
    function: _F | None,
    task_id: str | None,
    raw: TaskOptions,
    kind: str,
    *,
    branch: bool = False,
    multiple_outputs: bool | None = None,
    role: str | None = None,
) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
    """The decorators' common part: check the options now, and the function when it comes."""
    if task_id is not None:
        _check_task_id(task_id, kind)
    options = Options.parse(raw, kind)

    def decorate(fn: _F) -> TaskFunction[_F]:
        if isinstance(fn, TaskFunction):
            raise DagDefinitionError(f"{kind}: {fn!r} is already a task function")
        _check_function(fn, f"{kind} {getattr(fn, '__qualname__', fn)!r}")
        return TaskFunction(
            fn, task_id=task_id, options=options, branch=branch, multiple_outputs=multiple_outputs, role=role
        )

    if function is None:
        return decorate
    return decorate(function)


task = _TaskDecorator()
