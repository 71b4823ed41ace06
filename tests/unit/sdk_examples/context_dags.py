"""DAGs whose task prints its whole task context, for ``schedctl dags test``: a daily one, a six-hourly
one that takes any conf, and a manual one with a required param."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from schedd_sdk import Param, dag, get_current_context, task


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


@task
def show(
    ds: str,
    ds_nodash: str,
    ts: str,
    ts_nodash: str,
    logical_date: datetime,
    data_interval_start: datetime | None,
    data_interval_end: datetime | None,
    run_id: str,
    dag_id: str,
    task_id: str,
    map_index: int,
    try_number: int,
    ti: Any,
    dag_run: Any,
    params: dict[str, Any],
) -> None:
    arguments = dict(locals())
    values = {name: _text(value) for name, value in arguments.items() if name not in ("ti", "dag_run")}
    values["ti"] = {"attempt_id": ti.attempt_id, "try_number": ti.try_number, "task_id": ti.task_id}
    values["dag_run"] = {
        "run_type": dag_run.run_type,
        "conf": dag_run.conf,
        "data_interval_end": _text(dag_run.data_interval_end),
    }
    values["current_ds"] = get_current_context()["ds"]
    print("context=" + json.dumps(values, sort_keys=True))


@dag(
    schedule="@daily",
    start_date=datetime(2025, 1, 1),
    params={"rows": Param(10, type="integer"), "table": Param("t", type="string")},
)
def daily() -> None:
    show()


@dag(schedule=timedelta(hours=6), start_date=datetime(2025, 1, 1), allow_undeclared_conf=True)
def six_hourly() -> None:
    show()


@dag(params={"table": Param(type="string")})
def required() -> None:
    show()
