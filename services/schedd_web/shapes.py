"""The DAG's graph and a run's Gantt chart, laid out on the server as SVG coordinates.

Graph: a task's column is the length of the longest path of upstream tasks before it, its row its
place in that column (spec order); every edge goes from an upstream task to the right. Gantt: one
row per task instance, a segment per try from its start to its end (or to now while it runs), and
the estimated span of each remaining task, on a scale from the run's first start to its last
(estimated) end. Both are drawn by templates with classes only (the
CSP allows no inline style).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import present
from schedd_web.estimates import Estimate
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
class Segment:
    """One try of a task instance on the chart (``try_number`` 0: the estimate of a remaining task)."""

    try_number: int
    state: str
    x: int
    width: int
    text: str
    title: str


@dataclass(frozen=True)
class Bar:
    """A task instance's row: its whole span (``x``, ``width``) and a segment per try."""

    label: str
    state: str
    x: int
    width: int
    y: int
    title: str
    segments: tuple[Segment, ...] = ()
    #: on the critical path of the run's estimate
    critical: bool = False


def _epoch(ts: Timestamp) -> float | None:
    return ts.seconds + ts.nanos / 1e9 if ts.seconds or ts.nanos else None


def _tries(
    ti: pb.TaskInstance, attempts: Sequence[api_pb2.TaskAttempt], now: float
) -> list[tuple[int, str, float, float]]:
    """``(try, state, start, end)`` of each try of ``ti`` that started: its attempts, or else the
    task instance's own times (one try); a try still going ends now."""
    spans = []
    for attempt in attempts:
        start = _epoch(attempt.start_time)
        if start is not None:
            end = _epoch(attempt.end_time) or now
            spans.append((attempt.try_number, present.task_state(attempt.state), start, max(end, start)))
    start = _epoch(ti.start_time)
    if not spans and start is not None:
        end = _epoch(ti.end_time) or now
        spans.append((ti.try_number, present.task_state(ti.state), start, max(end, start)))
    return spans


def gantt(
    run: pb.DagRun,
    now: datetime | None = None,
    attempts: Sequence[api_pb2.TaskAttempt] = (),
    estimate: Estimate | None = None,
) -> tuple[list[Bar], int]:
    """A row per task instance that started (or that ``estimate`` expects), a segment per try
    (``attempts``; without them, the task instance's own times as one try), each in its state, and
    the estimate's expected span of each remaining task (state ``estimated``). The scale runs from
    the first start to the last end, estimated ends included. Rows by their first start."""
    current = (now or datetime.now(UTC)).timestamp()
    by_key: dict[tuple[str, int], list[api_pb2.TaskAttempt]] = {}
    for attempt in attempts:
        by_key.setdefault((attempt.task_id, attempt.map_index), []).append(attempt)
    expected = (
        {t: (s.timestamp(), estimate.ends[t].timestamp()) for t, s in estimate.starts.items()}
        if estimate
        else {}
    )
    rows: list[tuple[str, str, list[tuple[int, str, float, float]]]] = []
    for ti in run.task_instances:
        spans = _tries(ti, by_key.get((ti.task_id, ti.map_index), []), current)
        if ti.task_id in expected:  # on the task's first instance: the rest of its expected span
            start, end = expected.pop(ti.task_id)
            start = max(start, current) if spans else start
            if end > start or not spans:
                spans.append((0, "estimated", start, max(end, start)))
        if spans:
            rows.append((present.key_of(ti), present.task_state(ti.state), spans))
    rows += [(task_id, "none", [(0, "estimated", *span)]) for task_id, span in expected.items()]
    if not rows:
        return [], 0
    first = min(s for _, _, spans in rows for _, _, s, _ in spans)
    total = max(max(e for _, _, spans in rows for _, _, _, e in spans) - first, 1e-3)
    critical = set(estimate.critical) if estimate else set()

    def place(start: float, end: float) -> tuple[int, int]:
        x = LABEL_WIDTH + int((start - first) / total * CHART_WIDTH)
        return x, max(int((end - start) / total * CHART_WIDTH), 2)

    bars = []
    ordered = sorted(rows, key=lambda row: min(s for _, _, s, _ in row[2]))
    for index, (key, state, spans) in enumerate(ordered):
        segments = tuple(
            _segment(key, number, try_state, *place(start, end), end - start)
            for number, try_state, start, end in spans
        )
        x, width = place(min(s for _, _, s, _ in spans), max(e for _, _, _, e in spans))
        on_path = key.partition("[")[0] in critical
        tries = len([span for span in spans if span[0]])
        title = f"{key}: {state}, {tries} tr{'y' if tries == 1 else 'ies'}" + (
            ", critical" if on_path else ""
        )
        bars.append(Bar(key, state, x, width, index * (BAR_HEIGHT + BAR_GAP), title, segments, on_path))
    return bars, len(bars) * (BAR_HEIGHT + BAR_GAP)


def _segment(key: str, number: int, state: str, x: int, width: int, seconds: float) -> Segment:
    if not number:
        return Segment(0, state, x, width, "est.", f"{key}: expected to take {seconds:.0f}s (estimate)")
    glyph = present.GLYPHS.get(state, "?")
    return Segment(
        number, state, x, width, f"{number}{glyph}", f"{key} try {number}: {state}, {seconds:.1f}s"
    )
