"""The DAG being defined: set by ``with DAG(...)`` and by calling a ``@dag`` function.

A context variable, so definitions in different threads or asyncio tasks do not mix; nested
definitions stack (the inner DAG is current until its block ends). The DAG is held as a
:class:`~schedd_sdk.protocols.DagNode`, what its tasks and groups need of it.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

from schedd_sdk.protocols import DagNode

_CURRENT: ContextVar[DagNode | None] = ContextVar("schedd_sdk_current_dag", default=None)


def current_dag() -> DagNode | None:
    """The DAG whose definition is running, or None outside any definition."""
    return _CURRENT.get()


def enter(dag: DagNode) -> Token[DagNode | None]:
    return _CURRENT.set(dag)


def leave(token: Token[DagNode | None]) -> None:
    _CURRENT.reset(token)
