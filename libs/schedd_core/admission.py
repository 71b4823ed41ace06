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
"""

from __future__ import annotations

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


def admit(candidates: Iterable[Candidate], capacity: Capacity) -> list[Candidate]:
    """The candidates to queue now, in admission order. Updates ``capacity`` as it admits."""
    admitted: list[Candidate] = []
    blocked: set[str] = set()
    for c in sorted(candidates, key=Candidate.sort_key):
        if c.pool in blocked:
            continue
        dag_limit = capacity.dag_tasks.get(c.dag_id)
        if dag_limit is not None and dag_limit[1] >= dag_limit[0]:
            continue
        task_limit = capacity.task_instances.get((c.dag_id, c.task_id))
        if task_limit is not None and task_limit[1] >= task_limit[0]:
            continue
        total = capacity.pool_slots.get(c.pool, 0)
        if c.pool_slots > total:
            continue  # can never fit
        if c.pool_slots > total - capacity.pool_used.get(c.pool, 0):
            blocked.add(c.pool)  # keep the freed slots for this candidate
            continue
        admitted.append(c)
        capacity.pool_used[c.pool] = capacity.pool_used.get(c.pool, 0) + c.pool_slots
        if dag_limit is not None:
            capacity.dag_tasks[c.dag_id] = (dag_limit[0], dag_limit[1] + 1)
        if task_limit is not None:
            capacity.task_instances[(c.dag_id, c.task_id)] = (task_limit[0], task_limit[1] + 1)
    return admitted
