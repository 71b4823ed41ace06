"""Built-in sensors: a file appearing, a time of day, another DAG's task succeeding.

Each returns the sensor task it adds to the DAG being defined, and takes the sensor options of
``@task.sensor`` (``mode``, ``poke_interval``, ``timeout``, ``soft_fail``) and any task option::

    wait = FileSensor("/data/in/ready", task_id="wait_for_input", mode="reschedule", poke_interval=30)
    at_six = TimeSensor("06:00", task_id="after_six")             # in the DAG's time zone
    upstream = ExternalTaskSensor("ingest", "load", task_id="ingest_loaded", api="api.internal:50051")

- :func:`FileSensor`: done once ``path`` (or ``filepath=``, Airflow's name) exists on the worker that
  pokes (a file or a directory).
- :func:`TimeSensor`: done once the time of day, in the DAG's time zone (or ``timezone=``), is at or
  past ``target_time``; a poke compares the worker's clock only.
- :func:`ExternalTaskSensor`: done once task ``external_task_id`` of the run of DAG
  ``external_dag_id`` with the same logical date succeeded (or, with ``allowed_states``, is in
  one of them); it fails at once if that task is in one of ``failed_states``. It reads through the
  public api (``RunService.ListRuns`` and ``GetRun``): the address is given as ``api=`` (default:
  ``SCHEDD_API`` where the DAG is defined) and reaches the task as ``SCHEDD_API`` in its ``env``;
  the token is ``SCHEDCTL_TOKEN`` from the worker's environment (never in the spec: give the
  workers a viewer token), which reaches tasks only when the worker allows it by name
  (``SCHEDD_TASK_ENV_ALLOW=SCHEDCTL_TOKEN``, ``schedd_exec.environment``). Plaintext gRPC only;
  an api that requires TLS is not reachable from it.
"""

from __future__ import annotations

import os
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import grpc

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.sensors import sensor
from schedd_sdk.tasks import Task

__all__ = ["ExternalTaskSensor", "FileSensor", "TimeSensor"]

#: Seconds a poke of an ExternalTaskSensor waits for the api.
API_TIMEOUT = 10.0


@sensor
def file_exists(path: str) -> bool:
    """Whether ``path`` exists here."""
    return Path(path).exists()


@sensor
def time_reached(target_time: str, timezone: str) -> bool:
    """Whether the time of day in ``timezone`` is at or past ``target_time`` (ISO ``HH:MM[:SS]``)."""
    return datetime.now(ZoneInfo(timezone)).time() >= time.fromisoformat(target_time)


@sensor
def external_task_done(
    external_dag_id: str,
    external_task_id: str,
    allowed_states: list[str],
    failed_states: list[str],
    context: dict[str, str],
) -> bool:
    """Whether the task of the other DAG's run with this run's logical date is in ``allowed_states``;
    raises if it is in ``failed_states``."""
    address = os.environ.get("SCHEDD_API", "")
    if not address:
        raise RuntimeError("ExternalTaskSensor needs the api address in SCHEDD_API")
    metadata = [("authorization", f"Bearer {os.environ.get('SCHEDCTL_TOKEN', '')}")]
    logical_date = datetime.fromisoformat(context["SCHEDD_LOGICAL_DATE"])
    request = api_pb2.ListRunsRequest(parent=f"dags/{external_dag_id}", page_size=10)
    request.logical_date_from.FromDatetime(logical_date)
    request.logical_date_until.FromDatetime(logical_date + timedelta(microseconds=1))
    with grpc.insecure_channel(address) as channel:
        runs = api_pb2_grpc.RunServiceStub(channel)
        listed = runs.ListRuns(request, timeout=API_TIMEOUT, metadata=metadata)
        for summary in listed.runs:
            run = runs.GetRun(
                api_pb2.GetRunRequest(name=summary.name), timeout=API_TIMEOUT, metadata=metadata
            )
            for ti in run.task_instances:
                if ti.task_id != external_task_id:
                    continue
                state = pb.TaskState.Name(ti.state).removeprefix("TASK_STATE_").lower()
                if state in failed_states:
                    raise RuntimeError(
                        f"task {external_task_id!r} of {summary.name} is {state} (one of the failed states)"
                    )
                if state in allowed_states:
                    return True
    return False


def FileSensor(
    path: str | os.PathLike[str] | None = None,
    *,
    task_id: str,
    filepath: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Task:
    """A sensor task done once ``path`` exists on the worker that pokes it. ``filepath=`` (Airflow's
    name) is the same argument: give one of the two, not both."""
    if path is not None and filepath is not None:
        raise DagDefinitionError(
            f"FileSensor {task_id!r}: give the file as path or as filepath (Airflow's name), not both"
        )
    chosen = path if path is not None else filepath
    if chosen is None or not str(chosen):
        raise DagDefinitionError(
            f"FileSensor {task_id!r}: path must not be empty (give it as path or as filepath)"
        )
    return _add(file_exists, task_id, options, path=str(chosen))


def TimeSensor(target_time: time | str, *, task_id: str, timezone: str | None = None, **options: Any) -> Task:
    """A sensor task done once the time of day is at or past ``target_time``, in ``timezone`` (default:
    the DAG's time zone, UTC unless the DAG says otherwise)."""
    try:
        moment = target_time if isinstance(target_time, time) else time.fromisoformat(target_time)
    except (TypeError, ValueError):
        raise DagDefinitionError(
            f"TimeSensor {task_id!r}: target_time must be a datetime.time or 'HH:MM[:SS]', "
            f"not {target_time!r}"
        ) from None
    if moment.tzinfo is not None:
        raise DagDefinitionError(
            f"TimeSensor {task_id!r}: give the time zone as timezone=, not in target_time"
        )
    dag = current_dag()
    zone = timezone or (dag.timezone if dag is not None else "UTC")
    try:
        ZoneInfo(zone)
    except (KeyError, ValueError):
        raise DagDefinitionError(
            f"TimeSensor {task_id!r}: timezone {zone!r} is not an IANA time zone"
        ) from None
    return _add(time_reached, task_id, options, target_time=moment.isoformat(), timezone=zone)


def ExternalTaskSensor(
    external_dag_id: str,
    external_task_id: str,
    *,
    task_id: str,
    api: str | None = None,
    allowed_states: tuple[str, ...] = ("success",),
    failed_states: tuple[str, ...] = (),
    **options: Any,
) -> Task:
    """A sensor task done once ``external_task_id`` of DAG ``external_dag_id``'s run with the same
    logical date is in ``allowed_states`` (task state names: ``success``, ``skipped``, ...)."""
    address = api or os.environ.get("SCHEDD_API", "")
    if not address:
        raise DagDefinitionError(
            f"ExternalTaskSensor {task_id!r}: give the api address as api= "
            "(or SCHEDD_API where the DAG is defined)"
        )
    names = {pb.TaskState.Name(v).removeprefix("TASK_STATE_").lower() for v in pb.TaskState.values()}
    for label, states in (("allowed_states", allowed_states), ("failed_states", failed_states)):
        unknown = sorted(set(states) - names)
        if unknown:
            raise DagDefinitionError(f"ExternalTaskSensor {task_id!r}: {label} has unknown states {unknown}")
    env = {**dict(options.pop("env", None) or {}), "SCHEDD_API": address}
    return _add(
        external_task_done,
        task_id,
        {**options, "env": env},
        external_dag_id=external_dag_id,
        external_task_id=external_task_id,
        allowed_states=list(allowed_states),
        failed_states=list(failed_states),
    )


def _add(function: Any, task_id: str, options: dict[str, Any], **arguments: Any) -> Task:
    node = function.override(task_id=task_id, **options)(**arguments)
    if not isinstance(node, Task):
        raise DagDefinitionError(f"sensor {task_id!r}: call it inside a DAG definition")
    return node
