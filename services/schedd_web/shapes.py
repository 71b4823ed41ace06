"""The DAG's graph and a run's Gantt chart, laid out on the server as SVG coordinates.

Graph: a task's column is the length of the longest path of upstream tasks before it, its row its
place in that column (spec order); every edge goes from an upstream task to the right. Gantt: one
bar per task instance that started, from its start to its end (or to now while it runs), on a scale
from the run's first start to its last end. Both are drawn by templates with classes only (the
CSP allows no inline style).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from schedd.v1 import resources_pb2 as pb
from schedd_web import present
from schedd_web.grid import topological

NODE_WIDTH, NODE_HEIGHT, COLUMN_GAP, ROW_GAP, MARGIN = 150, 34, 60, 16, 10
BAR_HEIGHT, BAR_GAP, LABEL_WIDTH, CHART_WIDTH = 18, 6, 180, 700


@dataclass(frozen=True)
class Node:
    task_id: str
    x: int
    y: int
    state: str
    url: str


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Graph:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


def graph(spec: pb.DagSpec, run: pb.DagRun | None) -> Graph:
    """The layout of ``spec``'s tasks, each coloured by its state in ``run`` (``none`` without one)."""
    upstream = {t.task_id: list(t.upstream) for t in spec.tasks}
    depth: dict[str, int] = {}
    for task_id in topological(spec):
        depth[task_id] = 1 + max((depth[u] for u in upstream[task_id] if u in depth), default=-1)
    columns: dict[int, list[str]] = {}
    for task_id in topological(spec):
        columns.setdefault(depth[task_id], []).append(task_id)
    states: dict[str, list[pb.TaskInstance]] = {}
    for ti in run.task_instances if run is not None else []:
        states.setdefault(ti.task_id, []).append(ti)
    place: dict[str, tuple[int, int]] = {}
    nodes = []
    for column, task_ids in columns.items():
        for row, task_id in enumerate(task_ids):
            x = MARGIN + column * (NODE_WIDTH + COLUMN_GAP)
            y = MARGIN + row * (NODE_HEIGHT + ROW_GAP)
            place[task_id] = (x, y)
            tis = states.get(task_id, [])
            state = present.summary_state(tis) if tis else "none"
            url = (
                present.task_url(run.dag_id, run.run_id, present.key_of(tis[0]))
                if run and len(tis) == 1
                else ""
            )
            nodes.append(Node(task_id, x, y, state, url))
    edges = [
        Edge(
            place[u][0] + NODE_WIDTH,
            place[u][1] + NODE_HEIGHT // 2,
            place[t][0],
            place[t][1] + NODE_HEIGHT // 2,
        )
        for t, ups in upstream.items()
        for u in ups
        if u in place and t in place
    ]
    width = MARGIN * 2 + max(len(columns), 1) * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    height = (
        MARGIN * 2 + max((len(c) for c in columns.values()), default=1) * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    )
    return Graph(nodes, edges, width, height)


@dataclass(frozen=True)
class Bar:
    label: str
    state: str
    x: int
    width: int
    y: int
    title: str


def gantt(run: pb.DagRun, now: datetime | None = None) -> tuple[list[Bar], int]:
    """Bars of the run's task instances that started, and the chart's height (0: nothing started)."""
    current = (now or datetime.now(UTC)).timestamp()
    spans = []
    for ti in run.task_instances:
        if not ti.start_time.seconds:
            continue
        start = ti.start_time.seconds + ti.start_time.nanos / 1e9
        end = ti.end_time.seconds + ti.end_time.nanos / 1e9 if ti.end_time.seconds else current
        spans.append((ti, start, max(end, start)))
    if not spans:
        return [], 0
    first = min(s for _, s, _ in spans)
    total = max(max(e for _, _, e in spans) - first, 1e-3)
    bars = []
    for row, (ti, start, end) in enumerate(sorted(spans, key=lambda span: span[1])):
        x = LABEL_WIDTH + int((start - first) / total * CHART_WIDTH)
        width = max(int((end - start) / total * CHART_WIDTH), 2)
        state = present.task_state(ti.state)
        title = f"{present.key_of(ti)}: {state}, {end - start:.1f}s"
        bars.append(Bar(present.key_of(ti), state, x, width, row * (BAR_HEIGHT + BAR_GAP), title))
    return bars, len(bars) * (BAR_HEIGHT + BAR_GAP)
