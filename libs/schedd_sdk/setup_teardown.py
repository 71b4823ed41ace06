"""Setup and teardown tasks: ``@setup``, ``@teardown``, and ``Task.as_setup()`` / ``.as_teardown()``.

A setup task prepares what its downstream work needs (a cluster, a scratch table); a teardown undoes
it. As in Airflow:

* a teardown's trigger rule is ``all_done_setup_success``: it runs once all its upstream tasks are
  done, whatever their outcome, provided at least one of its upstream setup tasks succeeded (it is
  skipped when all of them were skipped, upstream_failed when none succeeded);
* ``work.as_teardown(setups=s)`` (or ``delete(s)`` with ``@teardown`` and ``s`` a ``@setup`` task's
  result) makes ``s`` a setup upstream of the teardown;
* a task in a setup's scope (downstream of the setup, upstream of one of its teardowns) that is not
  directly downstream of it still runs only once the setup succeeded
  (``schedd_core.triggers.evaluate_setups``);
* a run's final state ignores teardowns: the tasks that decide it are the leaves once teardowns
  are left out (``schedd_core.graph.DagGraph.leaves``).

Not supported: Airflow's ``on_failure_fail_dagrun``, ``with setup >> teardown:`` scopes, and
clearing a work task clearing its setup and teardown with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, Unpack, overload

from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.functions import TaskFunction, decorate_task
from schedd_sdk.options import TaskOptions

__all__ = ["setup", "teardown"]

_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def setup(function: _F, /) -> TaskFunction[_F]: ...


@overload
def setup(
    function: None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
) -> Callable[[_F], TaskFunction[_F]]: ...


def setup(
    function: _F | None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
    """``@setup`` / ``@setup(...)``: a task function whose tasks are setup tasks."""
    return decorate_task(function, task_id, options, "@setup", role="setup")


@overload
def teardown(function: _F, /) -> TaskFunction[_F]: ...


@overload
def teardown(
    function: None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
) -> Callable[[_F], TaskFunction[_F]]: ...


def teardown(
    function: _F | None = None, /, *, task_id: str | None = None, **options: Unpack[TaskOptions]
) -> TaskFunction[_F] | Callable[[_F], TaskFunction[_F]]:
    """``@teardown`` / ``@teardown(...)``: a task function whose tasks are teardowns; the trigger rule
    is always ``all_done_setup_success`` and cannot be set."""
    if options.get("trigger_rule") is not None:
        raise DagDefinitionError(
            "@teardown: a teardown's trigger rule is all_done_setup_success; it cannot be set"
        )
    return decorate_task(function, task_id, options, "@teardown", role="teardown")
