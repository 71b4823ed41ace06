"""How the worker's child calls a task function: which keyword arguments it adds to the call.

A task function is called with its call's arguments (resolved from the upstream results and, for an
instance of a mapped task, its elements: ``schedd_core.arguments``) and, for every parameter the
call does not give, the keyword argument of that name the worker offers:

* ``params``: the task's params (the DAG's, the task's on top, the run's conf on top);
* ``context``: the ``SCHEDD_*`` identity variables of the attempt, keyed by their variable names;
* in a task attempt, every name of the task context (``ds``, ``ti``, ``dag_run``...:
  ``schedd_core.task_context``), computed only when the function declares it.

A function taking ``**kwargs`` gets every name offered that its call does not give. A transactional
call's ``connection`` is added by ``schedd_exec.transactional``. A named parameter that the call does
not give, that is not offered and has no default is a :class:`SignatureError` naming it and what is
offered, before the function runs. A call that is not a task attempt (a callback: its environment
lacks the attempt's variables) is offered ``params`` and ``context`` only.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from schedd_core.task_context import CONTEXT_NAMES, RunningTask

#: The identity variables ``context`` holds, when the attempt's environment has them.
CONTEXT_VARS = (
    "SCHEDD_DAG_ID",
    "SCHEDD_RUN_ID",
    "SCHEDD_TASK_ID",
    "SCHEDD_TRY_NUMBER",
    "SCHEDD_ATTEMPT_ID",
    "SCHEDD_LOGICAL_DATE",
    "SCHEDD_DATA_INTERVAL_START",
    "SCHEDD_DATA_INTERVAL_END",
    "SCHEDD_RUN_TYPE",
    "SCHEDD_IDEMPOTENCY_KEY",
    "SCHEDD_MAP_INDEX",
)


class SignatureError(Exception):
    """The function has a parameter that nothing gives: running the task again cannot help."""


class TaskCallable:
    """A resolved target and what its signature accepts."""

    __slots__ = (
        "func",
        "parameters",
        "positional",
        "takes_all",
        "wants_connection",
        "wants_context",
        "wants_params",
    )

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        try:
            parameters = inspect.signature(func).parameters
        except (TypeError, ValueError):  # some builtins have no signature
            parameters = {}  # type: ignore[assignment]
        self.takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        keywordable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

        def accepts(name: str) -> bool:
            p = parameters.get(name)
            return self.takes_all or (p is not None and p.kind in keywordable)

        self.wants_params = accepts("params")
        self.wants_context = accepts("context")
        self.wants_connection = accepts("connection")
        #: (name, may be given by keyword, has a default) of each named parameter, in order
        self.parameters = tuple(
            (p.name, p.kind in keywordable, p.default is not p.empty)
            for p in parameters.values()
            if p.kind not in variadic
        )
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.positional = tuple(p.name for p in parameters.values() if p.kind in positional)

    def keywords(
        self,
        task: RunningTask | None,
        supplied: set[str],
        params: dict[str, Any],
        *,
        transactional: bool,
    ) -> dict[str, Any]:
        """The keyword arguments the worker adds to a call that gives the parameters ``supplied``:
        ``params``, ``context`` and the task context names (with ``task``) that the function
        declares and the call does not give, or all of them for ``**kwargs``. A parameter given by
        none of them and without a default is a :class:`SignatureError` naming it."""
        offered, names = (_WORKER_NAMES, _WORKER_SET) if task is None else (_TASK_NAMES, _TASK_SET)
        kwargs: dict[str, Any] = {}
        for name, keywordable, has_default in self.parameters:
            if name in supplied:
                continue
            if keywordable and name in names:
                kwargs[name] = _value(name, task, params)
            elif not has_default and not (keywordable and transactional and name == "connection"):
                raise SignatureError(_missing(self.func, name, offered))
        if self.takes_all:
            for name in offered:
                if name not in supplied and name not in kwargs:
                    kwargs[name] = _value(name, task, params)
        return kwargs


#: What a function is offered besides the task context names, in a task attempt or not.
_WORKER_NAMES = ("params", "context")
_TASK_NAMES = tuple(dict.fromkeys((*_WORKER_NAMES, *CONTEXT_NAMES)))
_WORKER_SET = frozenset(_WORKER_NAMES)
_TASK_SET = frozenset(_TASK_NAMES)


def _value(name: str, task: RunningTask | None, params: dict[str, Any]) -> Any:
    if name == "params":
        return params
    if name == "context":
        return {k: os.environ[k] for k in CONTEXT_VARS if k in os.environ}
    assert task is not None
    return task.value(name)


def _missing(func: Callable[..., Any], name: str, offered: tuple[str, ...]) -> str:
    why = (
        f"it is not a name of the task context ({', '.join(offered)})"
        if offered is _TASK_NAMES
        else f"this call is not a task attempt, so it gets no task context (only {', '.join(offered)})"
    )
    return (
        f"{getattr(func, '__qualname__', func)}() has the parameter {name!r}, which nothing gives: the "
        f"task's call does not pass it, it has no default, and {why}"
    )
