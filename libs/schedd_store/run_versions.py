"""Moving a run to its DAG's current version: what clear, mark and a backfill's reruns do with
``run_on_latest_version``, so a fix registered after a run failed reaches that run.

A run is pinned to one DAG version; every attempt records the version its run was pinned to when
the attempt was claimed (``task_attempts.dag_version_id``), so after a move the run still says which
version each try ran (``TaskInstance.dag_version``). The move happens inside the caller's
transaction, on a run it locked with its task instances:

* task instances the run's new version has no task for are REMOVED when they have not started
  (none, scheduled); those that ran keep their state (history), and the planner, which walks the new
  version's tasks, no longer looks at them;
* a task the new version drops that is queued, running, up for retry or up for reschedule makes the
  move fail (FailedPrecondition naming it): clear or cancel it first, or let it finish;
* task instances that have not started, once the caller cleared what it clears, take the new
  version's options (:func:`refresh_options`: pool, slots, queue, priority, branch, callbacks; a
  cleared one its retries too);
* tasks only the new version has get task instances when the leader plans the run next.

Not guaranteed: a task that changed from unmapped to mapped (or back) between the versions keeps the
task instances it has; clear it to expand it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schedd_core.errors import FailedPrecondition, quote
from schedd_core.graph import DagGraph
from schedd_core.states import TaskState
from schedd_store import statements as sql
from schedd_store.database import Connection as StoreConnection
from schedd_store.fence import FencedConnection
from schedd_store.records import parse_spec

#: The api's transactions and the leader's fenced ones both move runs.
Connection = StoreConnection | FencedConnection

#: States of a task instance that block moving its run to a version without its task.
_IN_FLIGHT = frozenset(
    {TaskState.QUEUED, TaskState.RUNNING, TaskState.UP_FOR_RETRY, TaskState.UP_FOR_RESCHEDULE}
)
_NOT_STARTED = frozenset({TaskState.NONE, TaskState.SCHEDULED})


async def move_to_current_version(
    conn: Connection, dag_id: str, run_id: str, run_pk: int, tasks: Iterable[Any]
) -> tuple[DagGraph, str]:
    """Pin the (locked) run to its DAG's current version and return that version's graph and hash.

    ``tasks`` are the run's locked task instances (rows with ``id``, ``task_id``, ``task_key`` and
    ``state``). A run already on the current version changes nothing but is answered the same."""
    row = (await conn.execute(sql.MOVE_RUN_TO_CURRENT_VERSION, {"run_pk": run_pk})).one()
    graph = DagGraph.from_spec(parse_spec(row.spec))
    rows = list(tasks)
    dropped = [t for t in rows if t.task_id not in graph.nodes]
    busy = sorted(t.task_key for t in dropped if t.state in _IN_FLIGHT)
    if busy:
        raise FailedPrecondition(
            f"run {quote(run_id)} of dag {quote(dag_id)} cannot move to version {row.version_hash}: "
            f"it has no task {', '.join(quote(k) for k in busy[:5])}, which is still queued, running or "
            "waiting to retry; clear or mark it first, or let it finish"
        )
    removed = [t.id for t in dropped if t.state in _NOT_STARTED]
    if removed:
        await conn.execute(sql.REMOVE_TASK_INSTANCES, {"ids": removed})
    return graph, str(row.version_hash)


async def refresh_options(conn: Connection, graph: DagGraph, rows: Iterable[Any]) -> None:
    """Give those of the run's (locked) task instances ``rows`` that are, now, in state none or
    scheduled their task's options in ``graph``; rows of tasks ``graph`` does not have are left alone."""
    waiting = [t for t in rows if t.task_id in graph.nodes]
    if not waiting:
        return
    nodes = [graph.nodes[t.task_id] for t in waiting]
    await conn.execute(
        sql.REFRESH_TASK_OPTIONS,
        {
            "ids": [t.id for t in waiting],
            "weights": [n.priority_weight for n in nodes],
            "pools": [n.pool for n in nodes],
            "slots": [n.pool_slots for n in nodes],
            "queues": [n.queue for n in nodes],
            "branches": [n.branch for n in nodes],
            "events": [",".join(n.callback_events) for n in nodes],
        },
    )
