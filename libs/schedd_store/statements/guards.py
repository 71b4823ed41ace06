"""Building statements: plain ones, and guarded state changes checked against the transition tables."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from sqlalchemy import TextClause, text

from schedd_core.states import (
    ATTEMPT_TRANSITIONS,
    BACKFILL_TRANSITIONS,
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    WORKER_TRANSITIONS,
)

_MACHINES: dict[str, Mapping[enum.StrEnum, frozenset[enum.StrEnum]]] = {
    "ti": TASK_TRANSITIONS,  # type: ignore[dict-item]
    "run": RUN_TRANSITIONS,  # type: ignore[dict-item]
    "attempt": ATTEMPT_TRANSITIONS,  # type: ignore[dict-item]
    "worker": WORKER_TRANSITIONS,  # type: ignore[dict-item]
    "backfill": BACKFILL_TRANSITIONS,  # type: ignore[dict-item]
}

#: The moves of every guarded statement, by its text: machine -> (sources, targets).
GUARDS: dict[str, dict[str, tuple[frozenset[str], frozenset[str]]]] = {}


def _sql(statement: str) -> TextClause:
    return text(statement)


def _guarded(statement: str, **moves: tuple[Iterable[enum.StrEnum], Iterable[enum.StrEnum]]) -> TextClause:
    """A state-changing statement whose guards are bound from the transition tables.

    For each machine named (``ti``, ``run``, ``attempt``, ``worker``, ``backfill``), ``:<machine>_sources`` is
    bound to the given sources, each checked to be an allowed source of every target the statement
    can set; a move the tables do not allow fails here, at import.
    """
    bound: dict[str, list[str]] = {}
    declared: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for machine, (sources, targets) in moves.items():
        table = _MACHINES[machine]
        source_set, target_set = frozenset(sources), frozenset(targets)
        for target in target_set:
            illegal = source_set - table[target]
            if illegal:
                raise ValueError(f"{machine}: {sorted(illegal)} -> {target} is not an allowed transition")
        bound[f"{machine}_sources"] = sorted(s.value for s in source_set)
        declared[machine] = (frozenset(s.value for s in source_set), frozenset(t.value for t in target_set))
    GUARDS[statement] = declared
    return text(statement).bindparams(**bound)
