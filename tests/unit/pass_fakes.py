"""Fakes for the pass planner's unit tests: runs as a pass reads them, and their graphs by version."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from schedd_core.graph import DagGraph
from schedd_core.planner import TaskSnapshot
from schedd_core.states import TaskState

DAY0 = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass
class FakeRun:
    """A run as a pass reads it (``schedd_core.pass_plan.PassRun``)."""

    pk: int
    version_id: int = 1
    state: str = "running"
    dag_id: str = "d"
    logical_date: datetime | None = DAY0
    age: float | None = None
    paused: bool = False
    backfill_id: int | None = None
    control_version: int = 0
    tasks: dict[str, TaskSnapshot] = field(default_factory=dict)
    ti_ids: dict[str, int] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)
    changed: Collection[str] | None = None


def run(
    pk: int,
    states: Mapping[str, TaskState] | None = None,
    *,
    day: int = 0,
    retry_due: Collection[str] = (),
    retry_unscheduled: Collection[str] = (),
    **fields: object,
) -> FakeRun:
    """A run whose task instances have ``states`` (by key), with ids ``pk * 100 + i`` in key order."""
    states = states or {}
    tasks = {
        key: TaskSnapshot(state, retry_due=key in retry_due, retry_unscheduled=key in retry_unscheduled)
        for key, state in states.items()
    }
    ids = {key: pk * 100 + i for i, key in enumerate(states, start=1)}
    made = FakeRun(pk, tasks=tasks, ti_ids=ids, logical_date=DAY0 + timedelta(days=day))
    for name, value in fields.items():
        setattr(made, name, value)
    return made


class Graphs:
    """Graphs by version id, as the version cache gives them."""

    def __init__(self, **by_version: DagGraph) -> None:
        self._graphs = {int(k.removeprefix("v")): g for k, g in by_version.items()}

    def __call__(self, version_id: int) -> DagGraph:
        return self._graphs[version_id]
