"""Every statement that sets a state is guarded by sources from the transition tables.

Reads the SQL of ``schedd_store.statements``: each ``UPDATE ... SET state = ...`` (task instances,
runs, attempts, workers, backfills) must have ``state = ANY(:<machine>_sources)`` (bound from the tables when
the statement is defined, and each bound move allowed by them) or ``state = ANY(:allowed_from)``
(computed by the caller from the same tables) in its WHERE clause, and no state literal there. A
new statement that writes a state any other way fails this test.
"""

from __future__ import annotations

import re

import pytest

from schedd_core.states import (
    ATTEMPT_TRANSITIONS,
    BACKFILL_TRANSITIONS,
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    WORKER_TRANSITIONS,
    TaskState,
)
from schedd_store import statements
from schedd_store.named_sql import Statement
from schedd_store.statements.guards import _guarded

MACHINE_OF_TABLE = {
    "task_instances": "ti",
    "dag_runs": "run",
    "task_attempts": "attempt",
    "workers": "worker",
    "backfills": "backfill",
}
TABLES = {
    "ti": TASK_TRANSITIONS,
    "run": RUN_TRANSITIONS,
    "attempt": ATTEMPT_TRANSITIONS,
    "worker": WORKER_TRANSITIONS,
    "backfill": BACKFILL_TRANSITIONS,
}
#: Where one UPDATE of a statement ends: its RETURNING, the end of its CTE, or the statement's end.
_END = re.compile(r"RETURNING|\)\s*,\s*\w+\s+AS\s*\(|\)\s*(?:SELECT|UPDATE|INSERT)\b")


def _statements() -> dict[str, str]:
    return {name: value.text for name, value in vars(statements).items() if isinstance(value, Statement)}


def _updates(sql: str) -> list[tuple[str, str, str]]:
    """``(table, SET list, WHERE clause)`` of every UPDATE in ``sql`` (an upsert's DO UPDATE included)."""
    result = []
    for match in re.finditer(r"(?:DO\s+UPDATE|UPDATE\s+(\w+)(?:\s+\w+)?)\s+SET\s+", sql):
        table = match.group(1) or re.search(r"INSERT\s+INTO\s+(\w+)", sql).group(1)  # type: ignore[union-attr]
        rest = sql[match.end() :]
        end = _END.search(rest)
        body = rest[: end.start()] if end else rest
        set_list, _, where = body.partition(" WHERE ")
        result.append((table, set_list, where))
    return result


def _sets_state(set_list: str) -> bool:
    return re.search(r"(?:^|,)\s*state\s*=", set_list) is not None


STATE_WRITERS = {
    name: [(t, s, w) for t, s, w in _updates(sql) if t in MACHINE_OF_TABLE and _sets_state(s)]
    for name, sql in _statements().items()
}
STATE_WRITERS = {name: updates for name, updates in STATE_WRITERS.items() if updates}


def test_the_audit_finds_the_state_writers() -> None:
    assert {"APPLY_RESULTS", "CLAIM_TASK_INSTANCES", "FAIL_OVER_LOST_ATTEMPTS", "UPSERT_WORKER"} <= set(
        STATE_WRITERS
    )
    assert len(STATE_WRITERS) >= 15


@pytest.mark.parametrize("name", sorted(STATE_WRITERS))
def test_every_state_write_is_guarded_by_the_tables(name: str) -> None:
    for table, _set_list, where in STATE_WRITERS[name]:
        machine = MACHINE_OF_TABLE[table]
        guard = re.search(rf"state\s*=\s*ANY\(:(({machine}(_\w+)?_sources)|allowed_from)\)", where)
        assert guard, f"{name}: the UPDATE of {table} sets a state without a guard from the tables: {where!r}"
        assert not re.search(r"\bstate\s*(=\s*'|IN\s*\()", where), f"{name}: a literal state guard: {where!r}"


@pytest.mark.parametrize("name", sorted(STATE_WRITERS))
def test_bound_guards_allow_exactly_the_declared_moves(name: str) -> None:
    sql = _statements()[name]
    declared = statements.GUARDS.get(sql, {})
    for table, set_list, where in STATE_WRITERS[name]:
        machine = MACHINE_OF_TABLE[table]
        found = re.search(rf":({machine}(?:_\w+)?)_sources\b", where)
        if found is None:
            continue  # a caller-computed guard (the statement's target is a parameter)
        move = found.group(1)
        assert move in declared, f"{name}: {move}_sources is not bound from the tables"
        sources, targets = declared[move]
        literal_targets = set(re.findall(r"'(\w+)'", set_list.split("state", 1)[1].split(",", 1)[0]))
        assert literal_targets <= targets, (
            f"{name}: sets {literal_targets - targets} beyond its declared targets"
        )
        table_of = TABLES[machine]
        via = statements.VIA.get(sql, {}).get(move)
        for target in targets:
            # a statement whose rows pass through a state within it: each step must be allowed
            steps = [(sources, target)] if via is None else [(sources, via), (frozenset({via}), target)]
            for step_sources, step_target in steps:
                allowed = {s.value for s in table_of[step_target]}  # type: ignore[index]
                assert step_sources <= allowed, (
                    f"{name}: {sorted(step_sources - allowed)} -> {step_target} is not allowed"
                )
        bound = statements.__dict__[name].bound[f"{move}_sources"]
        assert sorted(bound) == sorted(sources)


def test_a_move_through_a_state_is_checked_step_by_step() -> None:
    # none -> queued -> running is allowed one step at a time; none -> running is not a move
    _guarded(
        "UPDATE task_instances SET state = 'running' WHERE state = ANY(:ti_sources)",
        via={"ti": TaskState.QUEUED},
        ti=({TaskState.NONE}, {TaskState.RUNNING}),
    )
    with pytest.raises(ValueError, match=r"not an allowed transition"):
        _guarded(
            "UPDATE task_instances SET state = 'running' WHERE state = ANY(:ti_sources)",
            ti=({TaskState.NONE}, {TaskState.RUNNING}),
        )
    with pytest.raises(ValueError, match=r"not an allowed transition"):
        _guarded(
            "UPDATE task_instances SET state = 'running' WHERE state = ANY(:ti_sources)",
            via={"ti": TaskState.QUEUED},
            ti=({TaskState.SUCCESS}, {TaskState.RUNNING}),
        )


def test_a_move_the_tables_forbid_is_refused_when_the_statement_is_defined() -> None:
    with pytest.raises(ValueError, match=r"not an allowed transition"):
        _guarded(
            "UPDATE task_instances SET state = 'queued' WHERE state = ANY(:ti_sources)",
            ti=({TaskState.SUCCESS}, {TaskState.QUEUED}),
        )
