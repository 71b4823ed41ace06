"""Building statements: plain ones, and guarded state changes checked against the transition tables."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from schedd_core.states import (
    ATTEMPT_TRANSITIONS,
    BACKFILL_TRANSITIONS,
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    WORKER_TRANSITIONS,
)
from schedd_store.named_sql import Statement

_MACHINES: dict[str, Mapping[enum.StrEnum, frozenset[enum.StrEnum]]] = {
    "ti": TASK_TRANSITIONS,  # type: ignore[dict-item]
    "run": RUN_TRANSITIONS,  # type: ignore[dict-item]
    "attempt": ATTEMPT_TRANSITIONS,  # type: ignore[dict-item]
    "worker": WORKER_TRANSITIONS,  # type: ignore[dict-item]
    "backfill": BACKFILL_TRANSITIONS,  # type: ignore[dict-item]
}

#: The moves of every guarded statement, by its text: move (a machine, or ``<machine>_<name>``) ->
#: (sources, targets).
GUARDS: dict[str, dict[str, tuple[frozenset[str], frozenset[str]]]] = {}
#: The state a guarded statement's rows pass through within it, by its text: move -> state.
VIA: dict[str, dict[str, str]] = {}


def _sql(statement: str) -> Statement:
    return Statement(statement)


def _guarded(
    statement: str,
    via: Mapping[str, enum.StrEnum] | None = None,
    **moves: tuple[Iterable[enum.StrEnum], Iterable[enum.StrEnum]],
) -> Statement:
    """A state-changing statement whose guards are bound from the transition tables.

    For each move named by a machine (``ti``, ``run``, ``attempt``, ``worker``, ``backfill``), or by a
    machine and a name (``ti_handoff``: a statement that writes one machine's rows in two ways),
    ``:<move>_sources`` is bound to the given sources, each checked to be an allowed source of every
    target the statement can set; a move the tables do not allow fails here, at import. ``via``
    names, by move, the state its rows pass through within the statement (two moves in one write,
    e.g. a hand-off's queue-and-claim): then each source must be allowed into it, and it into each
    target.
    """
    bound: dict[str, list[str]] = {}
    declared: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for move, (sources, targets) in moves.items():
        machine = machine_of(move)
        table = _MACHINES[machine]
        source_set, target_set = frozenset(sources), frozenset(targets)
        step = (via or {}).get(move)
        for source_group, target in _steps(source_set, target_set, step):
            illegal = source_group - table[target]
            if illegal:
                raise ValueError(f"{machine}: {sorted(illegal)} -> {target} is not an allowed transition")
        bound[f"{move}_sources"] = sorted(s.value for s in source_set)
        declared[move] = (frozenset(s.value for s in source_set), frozenset(t.value for t in target_set))
    GUARDS[statement] = declared
    VIA[statement] = {machine: state.value for machine, state in (via or {}).items()}
    return Statement(statement, bound)


def machine_of(move: str) -> str:
    """The state machine a guarded move (``ti``, ``ti_handoff``...) belongs to."""
    return move.split("_", 1)[0]


def _steps(
    sources: frozenset[enum.StrEnum], targets: frozenset[enum.StrEnum], via: enum.StrEnum | None
) -> list[tuple[frozenset[enum.StrEnum], enum.StrEnum]]:
    """The (sources, target) moves to check: straight, or into ``via`` and from it."""
    if via is None:
        return [(sources, target) for target in targets]
    return [(sources, via)] + [(frozenset({via}), target) for target in targets]
