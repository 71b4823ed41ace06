"""How states, times, values and names look on the pages.

Every state has a colour, a glyph and a shape (``state-<name>`` CSS classes), so states are told
apart without colour too. User-provided values (conf, params, results, logs, descriptions) are
turned into plain strings here and escaped by the templates, never marked safe.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import resources_pb2 as pb
from schedd_core.jsonvalues import integral_numbers

#: glyph per state name; the CSS gives each a colour and a shape
GLYPHS = {
    "success": "✓",
    "failed": "✗",
    "running": "▶",
    "queued": "◷",
    "scheduled": "◔",
    "up_for_retry": "↻",
    "up_for_reschedule": "⏲",
    "upstream_failed": "⚠",
    "skipped": "↷",
    "removed": "⌀",
    "none": "·",
}
FINAL_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


def task_state(value: pb.TaskState.ValueType) -> str:
    """``success`` for TASK_STATE_SUCCESS; ``none`` for an unset state."""
    name = pb.TaskState.Name(value).removeprefix("TASK_STATE_").lower()
    return "none" if name == "unspecified" else name


def run_state(value: pb.RunState.ValueType) -> str:
    return pb.RunState.Name(value).removeprefix("RUN_STATE_").lower()


def run_type(value: pb.RunType.ValueType) -> str:
    return pb.RunType.Name(value).removeprefix("RUN_TYPE_").lower()


def backfill_strategy(value: pb.BackfillStrategy.ValueType) -> str:
    """``parallel`` for an unset strategy, as the api treats it."""
    name = pb.BackfillStrategy.Name(value).removeprefix("BACKFILL_STRATEGY_").lower()
    return "parallel" if name == "unspecified" else name


def when(ts: Timestamp) -> str:
    """``2026-12-03 13:14:51Z``, or an empty string for an unset timestamp."""
    if not ts.seconds and not ts.nanos:
        return ""
    return datetime.fromtimestamp(ts.seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def as_json(message: Message | None) -> str:
    """A protobuf value (Struct, Value) as indented JSON text; empty for an unset one."""
    if message is None:
        return ""
    value = integral_numbers(MessageToDict(message))
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) if value != {} else ""


def key_of(ti: pb.TaskInstance) -> str:
    """``task`` or, for a mapped instance, ``task[3]``: how the api names one task instance."""
    return f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id


def path_part(value: str) -> str:
    """``value`` quoted as one path segment of our URLs."""
    return quote(value, safe="")


def run_url(dag_id: str, run_id: str) -> str:
    return f"/dags/{path_part(dag_id)}/runs/{path_part(run_id)}"


def task_url(dag_id: str, run_id: str, key: str) -> str:
    return f"{run_url(dag_id, run_id)}/tasks/{path_part(key)}"


def state_counts(tis: list[pb.TaskInstance]) -> list[tuple[str, int]]:
    """``(state, count)`` of task instances, most frequent first (a mapped task's row)."""
    return Counter(task_state(t.state) for t in tis).most_common()


def summary_state(tis: list[pb.TaskInstance]) -> str:
    """One state for several instances of a mapped task: the most urgent one any instance is in."""
    order = ["failed", "upstream_failed", "up_for_retry", "running", "queued", "scheduled"]
    order += ["up_for_reschedule", "none", "removed", "skipped", "success"]
    states = {task_state(t.state) for t in tis}
    return next((s for s in order if s in states), "none")


def filters() -> dict[str, Any]:
    """The template filters of these helpers."""
    return {
        "task_state": task_state,
        "run_state": run_state,
        "run_type": run_type,
        "backfill_strategy": backfill_strategy,
        "when": when,
        "as_json": as_json,
        "path_part": path_part,
        "glyph": lambda state: GLYPHS.get(state, "?"),
    }
