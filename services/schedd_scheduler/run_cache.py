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

The runs used most recently (``hot_tasks`` task instances) are kept as the dictionaries a pass
plans with, so a pass over them copies them as it always did; the others are compacted (parallel
tuples and arrays, the snapshots and task keys shared between runs: about 40 bytes a task instance
instead of about 140, ``tests/unit/test_run_cache.py``) and turned back into dictionaries by the
next pass that merges them.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

from schedd_core.planner import TaskSnapshot
from schedd_store.planning_reads import PlanningRun

#: Task instances kept as dictionaries, in the runs used most recently.
HOT_TASKS = 10_000

_Maps = tuple[dict[str, TaskSnapshot], dict[str, int], dict[str, int]]


class _Compact(NamedTuple):
    """A cooled run's task instances: the keys, and in the same order their snapshots, ids and tries."""

    keys: tuple[str, ...]
    snapshots: tuple[TaskSnapshot, ...]
    ti_ids: array[int]
    tries: array[int]


@dataclass
class CachedRun:
    control_version: int
    #: The task instances as a pass plans with them (by key); None once the run cooled.
    maps: _Maps | None
    #: Task instances the leader wrote in the last pass over the run: read again before planning it.
    dirty: set[int] = field(default_factory=set)
    #: The successor hand-offs the leader wrote for the run in this term: source key -> target key.
    handoffs: dict[str, str] = field(default_factory=dict)
    compact: _Compact | None = None

    def __len__(self) -> int:
        if self.maps is not None:
            return len(self.maps[0])
        assert self.compact is not None
        return len(self.compact.keys)

    def cool(self) -> None:
        """Keep the task instances compactly (idempotent)."""
        if self.maps is None:
            return
        tasks, ti_ids, tries = self.maps
        keys = tuple(tasks)
        self.compact = _Compact(
            keys,
            tuple(tasks.values()),
            array("q", [ti_ids[k] for k in keys]),
            array("i", [tries[k] for k in keys]),  # try_number is an int4
        )
        self.maps = None

    def copies(self) -> _Maps:
        """New dictionaries of the task instances, for a pass to overlay."""
        if self.maps is not None:
            tasks, ti_ids, tries = self.maps
            return dict(tasks), dict(ti_ids), dict(tries)
        c = self.compact
        assert c is not None
        return (
            dict(zip(c.keys, c.snapshots, strict=True)),
            dict(zip(c.keys, c.ti_ids, strict=True)),
            dict(zip(c.keys, c.tries, strict=True)),
        )


class RunCache:
    def __init__(self, max_tasks: int = 50_000, hot_tasks: int = HOT_TASKS) -> None:
        self._runs: OrderedDict[int, CachedRun] = OrderedDict()
        self._tasks = 0
        self._max_tasks = max_tasks
        #: The runs kept as dictionaries, used longest ago first, with their sizes.
        self._hot: OrderedDict[int, int] = OrderedDict()
        self._hot_tasks = 0
        self._max_hot = hot_tasks

    def __contains__(self, run_pk: int) -> bool:
        return run_pk in self._runs

    def get(self, run_pk: int) -> CachedRun | None:
        return self._runs.get(run_pk)

    def keep(self, run: PlanningRun, dirty: set[int], handoffs: dict[str, str] | None = None) -> None:
        """Remember ``run`` as planned (its task instances as read), with the ones just written and
        the hand-offs in place."""
        self.drop(run.pk)
        size = len(run.tasks)
        self._runs[run.pk] = CachedRun(
            run.control_version, (run.tasks, run.ti_ids, run.tries), dirty, handoffs or {}
        )
        self._tasks += size
        self._hot[run.pk] = size
        self._hot_tasks += size
        while self._tasks > self._max_tasks and len(self._runs) > 1:
            pk, evicted = self._runs.popitem(last=False)
            self._uncount(pk, len(evicted))
        while self._hot_tasks > self._max_hot and len(self._hot) > 1:
            pk, size = self._hot.popitem(last=False)
            self._hot_tasks -= size
            self._runs[pk].cool()

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
            self._uncount(run_pk, len(entry))

    def _uncount(self, run_pk: int, size: int) -> None:
        """Take a run no longer kept off the counts."""
        self._tasks -= size
        hot = self._hot.pop(run_pk, None)
        if hot is not None:
            self._hot_tasks -= hot

    def clear(self) -> None:
        self._runs.clear()
        self._tasks = 0
        self._hot.clear()
        self._hot_tasks = 0

    def merge(self, fresh: PlanningRun) -> PlanningRun:
        """The run as planning needs it: the cached task instances, overlaid with those just read
        (``fresh.changed`` names them). The cache entry must exist and match the control version."""
        entry = self._runs[fresh.pk]
        self._runs.move_to_end(fresh.pk)
        tasks, ti_ids, tries = entry.copies()
        tasks.update(fresh.tasks)
        ti_ids.update(fresh.ti_ids)
        tries.update(fresh.tries)
        fresh.tasks, fresh.ti_ids, fresh.tries = tasks, ti_ids, tries
        return fresh
