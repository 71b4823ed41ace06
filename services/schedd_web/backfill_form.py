"""The backfill form: what a person types, read into a ``Backfill`` the api takes.

Dates are ISO 8601 dates or date-times; one without a UTC offset is read in the DAG's time zone
(UTC for a DAG without one). A date alone as the start is that day's first instant; as the end it
takes in the whole day (``2024-06-01`` .. ``2024-06-30`` is all of June), as ``schedctl backfill
create`` reads them. Every value that cannot be read gets an error naming its field, and nothing
is sent; the api's own field errors (``backfill.chunk_size``...) go next to the field they name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from schedd.v1 import resources_pb2 as pb
from schedd_rpc import convert

STRATEGIES = ("parallel", "sequential", "chunked")
REPROCESS = ("skip_existing", "rerun_failed", "rerun_all")
#: The smallest step of a stored timestamp: an inclusive end of a day is this much before midnight.
_RESOLUTION = timedelta(microseconds=1)
FIELDS = (
    "start",
    "end",
    "strategy",
    "max_active_runs",
    "chunk_size",
    "backward",
    "reprocess",
    "latest",
    "conf",
)
#: The api's names of the form's fields, for its field errors.
API_FIELDS = {
    "backfill.start_date": "start",
    "backfill.end_date": "end",
    "backfill.strategy": "strategy",
    "backfill.max_active_runs": "max_active_runs",
    "backfill.chunk_size": "chunk_size",
    "backfill.reprocess": "reprocess",
    "backfill.conf": "conf",
}


@dataclass
class BackfillForm:
    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def defaults() -> BackfillForm:
        return BackfillForm(
            {"strategy": "parallel", "max_active_runs": "4", "chunk_size": "10", "reprocess": "skip_existing"}
        )

    @staticmethod
    def of(source: Mapping[str, object]) -> BackfillForm:
        return BackfillForm({name: str(source.get(name, "")).strip() for name in FIELDS})

    def checked(self, name: str) -> bool:
        return self.values.get(name, "") in ("1", "on", "true")

    def attach_api_errors(self, errors: Mapping[str, str]) -> None:
        for path, problem in errors.items():
            name = next((f for prefix, f in API_FIELDS.items() if path.startswith(prefix)), "")
            if not name and path.startswith("conf."):
                name = "conf"
            self.errors[name or "form"] = f"{path}: {problem}"


def zone_of(spec: pb.DagSpec) -> tzinfo:
    try:
        return ZoneInfo(spec.timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def _moment(text: str, zone: tzinfo, *, end: bool) -> datetime:
    """ValueError saying what is wrong."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an ISO 8601 date or date-time (2024-01-31[T06:00])") from None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)
    if not end:
        return datetime.combine(day, time.min, zone)
    return datetime.combine(day + timedelta(days=1), time.min, zone).astimezone(UTC) - _RESOLUTION


def _positive(form: BackfillForm, name: str) -> int:
    raw = form.values.get(name, "")
    if not raw.isdigit() or int(raw) < 1:
        form.errors[name] = f"must be a whole number of at least 1, not {raw!r}"
        return 0
    return int(raw)


def read(form: BackfillForm, spec: pb.DagSpec) -> pb.Backfill | None:
    """The backfill the form asks for, or None with ``form.errors`` saying why."""
    zone = zone_of(spec)
    backfill = pb.Backfill()
    for name, end in (("start", False), ("end", True)):
        text = form.values.get(name, "")
        if not text:
            form.errors[name] = "is required"
            continue
        try:
            moment = _moment(text, zone, end=end)
        except ValueError as exc:
            form.errors[name] = str(exc)
            continue
        (backfill.end_date if end else backfill.start_date).FromDatetime(moment.astimezone(UTC))
    strategy, reprocess = form.values.get("strategy", ""), form.values.get("reprocess", "")
    if strategy not in STRATEGIES:
        form.errors["strategy"] = f"must be one of {', '.join(STRATEGIES)}"
    else:
        backfill.strategy = pb.BackfillStrategy.Value("BACKFILL_STRATEGY_" + strategy.upper())
    if reprocess not in REPROCESS:
        form.errors["reprocess"] = f"must be one of {', '.join(REPROCESS)}"
    else:
        backfill.reprocess = pb.ReprocessBehavior.Value("REPROCESS_BEHAVIOR_" + reprocess.upper())
    backfill.max_active_runs = _positive(form, "max_active_runs")
    backfill.chunk_size = _positive(form, "chunk_size")
    backfill.backward = form.checked("backward")
    backfill.run_on_latest_version = form.checked("latest")
    conf = form.values.get("conf", "")
    if conf:
        try:
            value = json.loads(conf)
        except json.JSONDecodeError as exc:
            form.errors["conf"] = f"is not JSON: {exc.msg}"
        else:
            if isinstance(value, dict):
                backfill.conf.CopyFrom(convert.struct(value))
            else:
                form.errors["conf"] = "must be a JSON object"
    return None if form.errors else backfill
