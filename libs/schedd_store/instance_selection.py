"""Which task instances of a run a manual change touches: pure functions over the run's graph and its
(locked) task instances, each a row with ``task_id``, ``map_index`` and ``task_key``.

Dependencies are between tasks, so a task reached downstream or upstream counts with every task
instance it has (all instances of a mapped task, or its placeholder). Rows come back in task id and
map index order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from schedd_core.errors import InvalidArgument, quote
from schedd_core.graph import DagGraph
from schedd_core.mapping import UNMAPPED, split_key, task_of
from schedd_core.states import TaskState


def to_clear(
    graph: DagGraph,
    dag_id: str,
    rows: Iterable[Any],
    task_ids: Sequence[str],
    *,
    downstream: bool,
    upstream: bool,
) -> list[Any]:
    """The rows a clear of ``task_ids`` resets: a task id names every instance of its task, a key
    ``task_id[map_index]`` one instance of a mapped task, none every task; then the tasks downstream
    (upstream) of the tasks named, with all their instances. InvalidArgument naming ``task_ids[i]``
    for a malformed key, a task the DAG version does not have, or a map index on a task that is not
    mapped. Rows in state none are left out (they have nothing to clear)."""
    whole, single = _named(graph, dag_id, task_ids)
    if not task_ids:
        whole = set(graph.nodes)
    named = whole | {task_of(key) for key in single}
    if downstream:
        whole |= reach(graph, named, lambda n: graph.nodes[n].downstream)
    if upstream:
        whole |= reach(graph, named, lambda n: graph.nodes[n].upstream)
    return in_order(
        t for t in rows if (t.task_id in whole or t.task_key in single) and t.state != TaskState.NONE
    )


def to_reevaluate(graph: DagGraph, rows: Iterable[Any], task_id: str) -> list[Any]:
    """The rows downstream of ``task_id`` that gave up because of it (upstream_failed or skipped): a
    task instance of it marked succeeded lets them be evaluated again."""
    below = reach(graph, {task_id}, lambda n: graph.nodes[n].downstream)
    return in_order(
        t for t in rows if t.task_id in below and t.state in (TaskState.UPSTREAM_FAILED, TaskState.SKIPPED)
    )


def in_order(rows: Iterable[Any]) -> list[Any]:
    """``rows`` by task id, then map index."""
    return sorted(rows, key=lambda t: (t.task_id, t.map_index))


def keys_in_order(keys: Iterable[str]) -> list[str]:
    """Keys by task id, then map index (``t[2]`` before ``t[10]``)."""
    return sorted(keys, key=split_key)


def reach(graph: DagGraph, start: Collection[str], edges: Callable[[str], frozenset[str]]) -> set[str]:
    """The tasks reachable from ``start`` along ``edges`` (``start`` itself only through a path)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        for nxt in edges(todo.pop()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _named(graph: DagGraph, dag_id: str, task_ids: Sequence[str]) -> tuple[set[str], set[str]]:
    """The tasks ``task_ids`` name by id, and the keys of the single mapped instances they name."""
    whole: set[str] = set()
    single: set[str] = set()
    for i, key in enumerate(task_ids):
        field = f"task_ids[{i}]"
        try:
            task_id, map_index = split_key(key)
        except ValueError:
            raise InvalidArgument(
                field, f"{quote(key)} is not a task id or task_id[map_index] (a non-negative map index)"
            ) from None
        if task_id not in graph.nodes:
            raise InvalidArgument(field, f"dag {quote(dag_id)} has no task {quote(task_id)}")
        if map_index == UNMAPPED:
            whole.add(task_id)
        elif task_id in graph.mapped:
            single.add(key)
        else:
            raise InvalidArgument(field, f"task {quote(task_id)} is not mapped: name it without a map index")
    return whole, single
