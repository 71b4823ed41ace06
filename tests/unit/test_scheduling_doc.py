"""docs/scheduling.md's table of each timetable's next three runs is what schedd computes: every row
is regenerated here from the example spec it names and compared with the page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb
from schedd_core.schedule_plan import ScheduleState, upcoming_intervals
from schedd_core.timetable_spec import timetable_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "scheduling.md"
START = "2025-01-01T00:00:00Z"
NOW = datetime(2025, 1, 1, tzinfo=UTC)

#: (timetable, the schedule fields of its example, as a spec file writes them)
EXAMPLES: list[tuple[str, dict[str, object]]] = [
    ("CronDataIntervalTimetable", {"schedule": "0 3 * * *"}),
    ("DeltaDataIntervalTimetable", {"schedule_interval": "21600s"}),
    (
        "CronTriggerTimetable",
        {
            "schedule": "0 3 * * *",
            "cron_semantics": "CRON_SEMANTICS_TRIGGER",
            "trigger_options": {"interval": "3600s"},
        },
    ),
    ("MultipleCronTriggerTimetable", {"trigger": {"crons": ["0 3 * * *", "30 12 * * 3"]}}),
    ("DeltaTriggerTimetable", {"trigger": {"every": "21600s"}}),
    (
        "EventsTimetable",
        {"trigger": {"events": ["2025-01-05T08:27:00Z", "2025-01-17T08:27:00Z", "2025-01-22T20:50:00Z"]}},
    ),
    ("OnceTimetable", {"schedule": "@once"}),
]


def short(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%m-%d %H:%M")


def rows() -> list[str]:
    """The table's rows: each example's next three runs for a DAG registered at its start date."""
    out = []
    for name, fields in EXAMPLES:
        spec = json_format.ParseDict({"dag_id": "d", "start_date": START, **fields}, pb.DagSpec())
        state = ScheduleState(next_interval=None, catchup=True, active_runs=0, max_active_runs=0)
        runs = list(upcoming_intervals(timetable_of(spec), state, NOW, 3))
        shown = json.dumps(fields).replace("|", "\\|")
        listed = "<br>".join(
            f"{short(r.run_after)} · {short(r.logical_date)} · [{short(r.start)}, {short(r.end)}]"
            for r in runs
        )
        out.append(f"| {name} | `{shown}` | {listed} |")
    return out


def test_the_next_runs_table_is_what_schedd_computes() -> None:
    text = DOC.read_text()
    table = text.split("<!-- next-runs -->")[1]
    assert [line for line in table.strip().splitlines() if line.startswith("| ") and "·" in line] == rows()
