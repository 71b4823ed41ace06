"""A DAG's grid: its recent runs as columns (oldest on the left), its tasks as rows.

A cell shows the task's state in that run by colour, glyph and shape; a mapped task is one row whose
cell counts its instances by state (``3✓ 1▶``) and takes the shape of the most urgent of them. Rows
follow the DAG's current version, then tasks only older runs have.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from schedd.v1 import resources_pb2 as pb
from schedd_web import present


@dataclass(frozen=True)
class Cell:
    state: str
    text: str
    url: str
    title: str
    #: a mapped task's cell (counts, drawn as a pill)
    mapped: bool = False


@dataclass(frozen=True)
class Column:
    run: pb.DagRun
    state: str
    url: str
    label: str


@dataclass(frozen=True)
class Row:
    task_id: str
    cells: list[Cell | None]


#: Each task state's name, looked up once (a grid has thousands of cells).
_STATE_NAMES = {value: present.task_state(value) for value in pb.TaskState.values()}


def _cell(run_url: str, task_id: str, tis: list[pb.TaskInstance]) -> Cell:
    """The cell of ``task_id`` in the run at ``run_url`` (quoted once per run: a grid has thousands
    of cells)."""
    mapped = any(t.map_index >= 0 for t in tis)
    if not mapped:
        ti = tis[0]
        state = _STATE_NAMES.get(ti.state) or present.task_state(ti.state)
        url = f"{run_url}/tasks/{present.path_part(present.key_of(ti))}"
        return Cell(state, present.GLYPHS.get(state, "?"), url, f"{task_id}: {state}")
    counts = present.state_counts(tis)
    text = " ".join(f"{n}{present.GLYPHS.get(state, '?')}" for state, n in counts)
    title = f"{task_id}: {len(tis)} mapped instances, " + ", ".join(f"{n} {s}" for s, n in counts)
    url = f"{run_url}/mapped/{present.path_part(task_id)}"
    return Cell(present.summary_state(tis), text, url, title, mapped=True)


def topological(spec: pb.DagSpec) -> list[str]:
    """The spec's task ids, every task after its upstream tasks (in spec order where free)."""
    remaining = {t.task_id: set(t.upstream) for t in spec.tasks}
    ordered: list[str] = []
    while remaining:
        ready = [task_id for task_id, upstream in remaining.items() if not upstream - set(ordered)]
        if not ready:  # a cycle cannot be registered; keep whatever is left in spec order
            ready = list(remaining)
        for task_id in ready:
            ordered.append(task_id)
            del remaining[task_id]
    return ordered


def build(spec: pb.DagSpec, runs: list[pb.DagRun]) -> tuple[list[Column], list[Row]]:
    """The grid of ``runs`` (given newest first) for the DAG whose current spec is ``spec``."""
    ordered = list(reversed(runs))
    by_run: list[dict[str, list[pb.TaskInstance]]] = []
    task_ids = topological(spec)
    for run in ordered:
        tis: dict[str, list[pb.TaskInstance]] = defaultdict(list)
        for ti in run.task_instances:
            tis[ti.task_id].append(ti)
            if ti.task_id not in task_ids:
                task_ids.append(ti.task_id)
        by_run.append(tis)
    columns = [
        Column(
            run,
            present.run_state(run.state),
            present.run_url(run.dag_id, run.run_id),
            present.when(run.logical_date) or run.run_id,
        )
        for run in ordered
    ]
    rows = [
        Row(
            task_id,
            [
                _cell(column.url, task_id, tis[task_id]) if tis.get(task_id) else None
                for column, tis in zip(columns, by_run, strict=True)
            ],
        )
        for task_id in task_ids
    ]
    return columns, rows
