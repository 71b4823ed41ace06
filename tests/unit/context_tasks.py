"""Task functions that ``test_task_context.py`` runs in the warm pool's child processes."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from schedd_core.task_context import DagRunInfo, TaskInstanceInfo
from schedd_sdk import get_current_context


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, TaskInstanceInfo | DagRunInfo):
        fields = {k: _text(v) for k, v in value._asdict().items() if k != "conf_json"}
        if isinstance(value, DagRunInfo):
            fields["conf"] = value.conf
        return fields
    return value


def airflow_style(
    ds: str,
    logical_date: datetime,
    data_interval_start: datetime | None,
    data_interval_end: datetime | None,
    ti: TaskInstanceInfo,
    dag_run: DagRunInfo,
    params: dict[str, Any],
) -> dict[str, Any]:
    assert logical_date.tzinfo is not None
    return {
        "ds": ds,
        "logical_date": _text(logical_date),
        "data_interval_start": _text(data_interval_start),
        "data_interval_end": _text(data_interval_end),
        "ti": _text(ti),
        "dag_run": _text(dag_run),
        "params": params,
    }


def everything(**kwargs: Any) -> dict[str, Any]:
    return {name: _text(value) for name, value in kwargs.items()}


def from_anywhere() -> dict[str, Any]:
    """The context read with ``get_current_context()`` in the task and in a thread it starts."""
    seen: dict[str, Any] = {}

    def read() -> None:
        seen["thread"] = get_current_context()["ts_nodash"]

    worker = threading.Thread(target=read)
    worker.start()
    worker.join()
    context = get_current_context()
    return {"ds_nodash": context["ds_nodash"], "try_number": context["try_number"], **seen}


async def asynchronous(ts: str) -> dict[str, str]:
    return {"ts": ts, "current": get_current_context()["ts"]}


def outside() -> str:
    """What ``get_current_context()`` says where there is no task attempt."""
    try:
        get_current_context()
    except RuntimeError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "a context"


def args_first(rows: list[int], ds: str, map_index: int = 7) -> dict[str, Any]:
    return {"rows": rows, "ds": ds, "map_index": map_index}


def misspelt(ds: str, dss: str) -> None:
    raise AssertionError("never called")
