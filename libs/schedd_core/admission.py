"""Admission: which ready task instances may queue now, given pools and concurrency limits.

Pure. Candidates are considered highest priority first, then oldest logical date,
then id. Within a pool the order is strict: when the next candidate needs more
slots than are free, the pool admits nobody else this time, so a task that needs
several slots is never starved by a stream of one-slot tasks behind it. A
candidate held back by its DAG's ``max_active_tasks`` or its task's
``max_active_instances`` does not block its pool. Pools are independent, so a full
pool never holds back another pool's tasks.

A candidate that needs more slots than its pool has in total can never run; it is
passed over (``explain`` reports it) rather than blocking the pool forever.

**Fair sharing between backfills and the rest.** The candidates of a pool form two lanes:
task instances of backfill runs, and all the others (scheduled and manual runs). A pool's
``backfill_share`` splits its slots: while the other lane has candidates waiting, the backfill
lane holds at most ``floor(share * slots)`` slots (at least one when the share is above 0) and
the other lane at most the rest (at least one when the share is below 1). A lane whose rival
waits for nothing borrows every idle slot. Slots a lane borrowed are not taken back from
running work; as they free up, the waiting lane gets them, since the borrower is over its
share. So a large backfill never starves scheduled runs of more than its share, and scheduled
runs never starve a backfill of its share. The strict order (and its blocking) holds within
each lane.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Candidate:
    ti_id: int
    dag_id: str
    task_id: str
    pool: str
    pool_slots: int
    priority: int
    logical_date: datetime
    #: Belongs to a backfill run (the backfill lane of its pool).
    backfill: bool = False

    def sort_key(self) -> tuple[int, datetime, int]:
        return (-self.priority, self.logical_date, self.ti_id)


@dataclass
class Capacity:
    #: pool -> total slots
    pool_slots: Mapping[str, int]
    #: pool -> slots taken by queued and running task instances
    pool_used: dict[str, int]
    #: dag_id -> (limit, active) for DAGs with max_active_tasks
    dag_tasks: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: (dag_id, task_id) -> (limit, active) for tasks with max_active_instances
    task_instances: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    #: pool -> the share of its slots backfills may hold while other work waits (default 0.5)
    backfill_share: Mapping[str, float] = field(default_factory=dict)
    #: pool -> slots of pool_used taken by task instances of backfill runs
    backfill_used: dict[str, int] = field(default_factory=dict)

    def lane_quota(self, pool: str, backfill: bool) -> int:
        """The slots a lane may hold while the other lane waits."""
        total = self.pool_slots.get(pool, 0)
        share = self.backfill_share.get(pool, 0.5)
        backfill_slots = math.floor(share * total)
        if backfill:
            return max(backfill_slots, 1 if share > 0 and total else 0)
        return max(total - backfill_slots, 1 if share < 1 and total else 0)

    def lane_used(self, pool: str, backfill: bool) -> int:
        used_by_backfills = self.backfill_used.get(pool, 0)
        return used_by_backfills if backfill else self.pool_used.get(pool, 0) - used_by_backfills


Lane = tuple[str, bool]


def admit(candidates: Iterable[Candidate], capacity: Capacity) -> list[Candidate]:
    """The candidates to queue now, in admission order. Updates ``capacity`` as it admits.

    Rounds over the candidates in order; a round ends when every lane is done, and another starts
    only when a lane stopped waiting in it (so the other may borrow its idle slots): at most a few
    rounds, whatever the number of candidates.
    """
    remaining = sorted(candidates, key=Candidate.sort_key)
    admitted: list[Candidate] = []
    #: Lanes whose next candidate needs more slots than are free: closed for this call.
    blocked: set[Lane] = set()
    waiting = _waiting_lanes(remaining, capacity)
    while remaining:
        held: list[Candidate] = []
        over_share: set[Lane] = set()
        for c in remaining:
            lane = (c.pool, c.backfill)
            if lane in blocked or lane in over_share:
                held.append(c)
                continue
            if _limited(c, capacity) or c.pool_slots > capacity.pool_slots.get(c.pool, 0):
                continue  # held back by a DAG or task limit, or can never fit: passed over
            rival_waits = (c.pool, not c.backfill) in waiting
            if rival_waits and capacity.lane_used(*lane) + c.pool_slots > capacity.lane_quota(*lane):
                over_share.add(lane)
                held.append(c)
                continue
            total = capacity.pool_slots.get(c.pool, 0)
            if c.pool_slots > total - capacity.pool_used.get(c.pool, 0):
                blocked.add(lane)  # keep the freed slots for this candidate
                held.append(c)
                continue
            admitted.append(c)
            _take(c, capacity)
        now_waiting = _waiting_lanes(held, capacity)
        if now_waiting == waiting:
            break
        remaining, waiting = held, now_waiting
    return admitted


def _waiting_lanes(candidates: Iterable[Candidate], capacity: Capacity) -> set[Lane]:
    return {
        (c.pool, c.backfill)
        for c in candidates
        if c.pool_slots <= capacity.pool_slots.get(c.pool, 0) and not _limited(c, capacity)
    }


def _limited(c: Candidate, capacity: Capacity) -> bool:
    dag_limit = capacity.dag_tasks.get(c.dag_id)
    if dag_limit is not None and dag_limit[1] >= dag_limit[0]:
        return True
    task_limit = capacity.task_instances.get((c.dag_id, c.task_id))
    return task_limit is not None and task_limit[1] >= task_limit[0]


def _take(c: Candidate, capacity: Capacity) -> None:
    capacity.pool_used[c.pool] = capacity.pool_used.get(c.pool, 0) + c.pool_slots
    if c.backfill:
        capacity.backfill_used[c.pool] = capacity.backfill_used.get(c.pool, 0) + c.pool_slots
    dag_limit = capacity.dag_tasks.get(c.dag_id)
    if dag_limit is not None:
        capacity.dag_tasks[c.dag_id] = (dag_limit[0], dag_limit[1] + 1)
    task_limit = capacity.task_instances.get((c.dag_id, c.task_id))
    if task_limit is not None:
        capacity.task_instances[(c.dag_id, c.task_id)] = (task_limit[0], task_limit[1] + 1)
