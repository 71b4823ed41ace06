"""What the leader knows of the runs it evaluates, between passes of one term.

A pass that evaluates a run in full keeps its task instances here; the next pass for that run reads
again only what changed since: the task instances a registry reported (``run/ti`` notifications),
those the leader wrote itself (``dirty``), and the run in full when anything else may have changed
it: its ``control_version`` moved (every manual change raises it under the run's lock), the run is
not known here, or it was asked for in full (a new run, a retry coming due, a lost attempt failed
over, a pool resized, a listener that reconnected, a failed pass).

What the cache may hold stale is only what nobody reports: a claim moving a task instance from
queued to running. The planner treats both alike, and a write that relied on the difference (a
run timeout failing running attempts) is guarded, so its shortfall rolls the pass back and the run
is read in full. Entries are dropped when their run ends and when a pass over them fails; the
cache holds at most ``max_tasks`` task instances, dropping the runs used longest ago.

At rest an entry is compact (parallel tuples and arrays, the snapshots and task keys shared between
runs: about 40 bytes a task instance, ``tests/unit/test_run_cache.py``); a pass gets dictionaries
built from it by :meth:`RunCache.merge`.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass, field

from schedd_core.planner import TaskSnapshot
from schedd_store.planning_reads import PlanningRun


@dataclass
class CachedRun:
    control_version: int
    #: The task instance keys, and in the same order their snapshots, ids and try numbers.
    keys: tuple[str, ...]
    snapshots: tuple[TaskSnapshot, ...]
    ti_ids: array[int]
    tries: array[int]
    #: Task instances the leader wrote in the last pass over the run: read again before planning it.
    dirty: set[int] = field(default_factory=set)
    #: The successor hand-offs the leader wrote for the run in this term: source key -> target key.
    handoffs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, run: PlanningRun, dirty: set[int], handoffs: dict[str, str]) -> CachedRun:
        keys = tuple(run.tasks)
        return cls(
            run.control_version,
            keys,
            tuple(run.tasks.values()),
            array("q", [run.ti_ids[k] for k in keys]),
            array("i", [run.tries[k] for k in keys]),  # try_number is an int4
            dirty,
            handoffs,
        )


class RunCache:
    def __init__(self, max_tasks: int = 50_000) -> None:
        self._runs: OrderedDict[int, CachedRun] = OrderedDict()
        self._tasks = 0
        self._max_tasks = max_tasks

    def __contains__(self, run_pk: int) -> bool:
        return run_pk in self._runs

    def get(self, run_pk: int) -> CachedRun | None:
        return self._runs.get(run_pk)

    def keep(self, run: PlanningRun, dirty: set[int], handoffs: dict[str, str] | None = None) -> None:
        """Remember ``run`` as planned (its task instances as read), with the ones just written and
        the hand-offs in place."""
        self.drop(run.pk)
        self._runs[run.pk] = CachedRun.of(run, dirty, handoffs or {})
        self._tasks += len(run.tasks)
        while self._tasks > self._max_tasks and len(self._runs) > 1:
            _, evicted = self._runs.popitem(last=False)
            self._tasks -= len(evicted.keys)

    def handoffs(self, run_pk: int) -> dict[str, str] | None:
        """The hand-offs the leader wrote for a known run in this term; None for a run it does not
        know (its hand-offs are then reviewed in full)."""
        entry = self._runs.get(run_pk)
        return entry.handoffs if entry is not None else None

    def mark_written(self, run_pk: int, ti_ids: set[int]) -> None:
        """The leader wrote these task instances of a known run (admitting what waited in a pool):
        read them again before planning it."""
        entry = self._runs.get(run_pk)
        if entry is not None:
            entry.dirty |= ti_ids

    def drop(self, run_pk: int) -> None:
        entry = self._runs.pop(run_pk, None)
        if entry is not None:
            self._tasks -= len(entry.keys)

    def clear(self) -> None:
        self._runs.clear()
        self._tasks = 0

    def merge(self, fresh: PlanningRun) -> PlanningRun:
        """The run as planning needs it: the cached task instances, overlaid with those just read
        (``fresh.changed`` names them). The cache entry must exist and match the control version."""
        entry = self._runs[fresh.pk]
        self._runs.move_to_end(fresh.pk)
        tasks = dict(zip(entry.keys, entry.snapshots, strict=True))
        tasks.update(fresh.tasks)
        ti_ids = dict(zip(entry.keys, entry.ti_ids, strict=True))
        ti_ids.update(fresh.ti_ids)
        tries = dict(zip(entry.keys, entry.tries, strict=True))
        tries.update(fresh.tries)
        fresh.tasks, fresh.ti_ids, fresh.tries = tasks, ti_ids, tries
        return fresh
