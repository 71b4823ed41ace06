"""Why a key names no task instance of a run: the NotFound the api's lookups by key answer.

A key is a task id, or ``task_id[map_index]`` for an instance of a mapped task
(``schedd_core.mapping``). A lookup that finds no row asks :func:`missing_instance` for the error,
which tells a key that may still name a task instance later (:class:`NotStartedYet`: the run has not
been planned, or the mapped task has not been expanded yet) from one that names none for good in
this run's DAG version: an unknown run or task, a map index for a task that is not mapped, a mapped
task's plain id once it was expanded, a map index past its instances. "For good" holds for what
this reads; a clear or a re-expansion by the scheduler may change a mapped task's instance count
later.
"""

from __future__ import annotations

from schedd_core.errors import NotFound, quote
from schedd_core.graph import DagGraph
from schedd_core.mapping import UNMAPPED, instance_key, split_key
from schedd_core.states import TaskState
from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.records import parse_spec


class NotStartedYet(NotFound):
    """The key names no task instance, or one that has not run, yet; it may later (the run goes on)."""


async def missing_instance(conn: Connection, dag_id: str, run_id: str, key: str) -> NotFound:
    """The error for a (well-formed) ``key`` that names no task instance of the run."""
    task_id, map_index = split_key(key)
    params = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id}
    row = (await conn.execute(sql.TASK_INSTANCES_OF_TASK, params)).first()
    if row is None:
        return NotFound(f"run {quote(run_id)} of dag {quote(dag_id)} not found")
    graph = DagGraph.from_spec(parse_spec(row.spec))
    if task_id not in graph.nodes:
        return NotFound(f"dag {quote(dag_id)} has no task {quote(task_id)}")
    mapped = task_id in graph.mapped
    count = int(row.instances)
    if map_index != UNMAPPED and not mapped:
        return NotFound(f"task {quote(task_id)} is not mapped: name it {quote(task_id)}, without a map index")
    if count:
        listed = _instances(task_id, count)
        if map_index == UNMAPPED:
            return NotFound(f"task {quote(task_id)} is mapped: name one of its instances, {listed}")
        return NotFound(f"task {quote(task_id)} of run {quote(run_id)} has no instance {map_index}: {listed}")
    if map_index == UNMAPPED or row.placeholder_state in (None, TaskState.NONE, TaskState.SCHEDULED):
        what = "has no task instance yet" if map_index == UNMAPPED else "has not been expanded yet"
        return NotStartedYet(f"task {quote(task_id)} of run {quote(run_id)} {what}")
    return NotFound(
        f"task {quote(task_id)} of run {quote(run_id)} has no instances: it is {row.placeholder_state} "
        f"without being expanded; name it {quote(task_id)}"
    )


def _instances(task_id: str, count: int) -> str:
    first = quote(instance_key(task_id, 0))
    if count == 1:
        return f"{first} (its only one)"
    return f"{first} to {quote(instance_key(task_id, count - 1))} ({count} instances)"
