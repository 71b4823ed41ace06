"""The DAG being defined: set by ``with DAG(...)`` and by calling a ``@dag`` function.

A context variable, so definitions in different threads or asyncio tasks do not mix; nested
definitions stack (the inner DAG is current until its block ends).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schedd_sdk.dags import DAG

_CURRENT: ContextVar[DAG | None] = ContextVar("schedd_sdk_current_dag", default=None)


def current_dag() -> DAG | None:
    """The DAG whose definition is running, or None outside any definition."""
    return _CURRENT.get()


def enter(dag: DAG) -> Token[DAG | None]:
    return _CURRENT.set(dag)


def leave(token: Token[DAG | None]) -> None:
    _CURRENT.reset(token)
