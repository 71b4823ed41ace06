"""Sensor functions and a DAG using them, for ``test_sensor_spec``."""

from __future__ import annotations

from datetime import timedelta

from schedd_sdk import PokeReturnValue, dag, task
from schedd_sdk.builtin_sensors import ExternalTaskSensor, FileSensor, TimeSensor


@task.sensor(
    poke_interval=timedelta(seconds=30), timeout=timedelta(hours=1), mode="reschedule", soft_fail=True
)
def rows_landed(table: str) -> PokeReturnValue:
    return PokeReturnValue(is_done=table == "full", xcom_value=len(table))


@task.sensor
def flag(value: bool) -> bool:
    return value


@task.sensor
async def flag_later(value: bool) -> bool:
    return value


@task
def load(rows: int) -> int:
    return rows


@dag(timezone="Europe/Berlin")
def sensing() -> None:
    load(rows_landed("orders"))
    flag.override(task_id="quick", poke_interval=1, timeout=None)(True)
    FileSensor("/data/ready", task_id="file", mode="reschedule", poke_interval=5, retries=1)
    TimeSensor("06:30", task_id="at_six_thirty")
    TimeSensor("06:30", task_id="at_six_thirty_utc", timezone="UTC")
    ExternalTaskSensor("ingest", "load", task_id="ingested", api="api.internal:50051")
