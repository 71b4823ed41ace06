"""The SDK's side of the task context: task functions that declare context names are called in a DAG
without them, the public names are exported, and ``FileSensor`` takes Airflow's ``filepath``."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest

import schedd_sdk
from schedd_core import task_context
from schedd_sdk import DAG, DagDefinitionError, TaskContext, dag, get_current_context, task
from schedd_sdk.builtin_sensors import FileSensor


@task
def extract() -> list[int]:
    return [1, 2]


@task
def load(rows: list[int], ds: str, ti: Any, dag_run: Any, params: dict[str, Any]) -> int:
    return len(rows)


@task
def stamp(ds: str, *, logical_date: Any = None, params: dict[str, Any]) -> str:
    return ds


def test_context_names_are_left_to_the_worker_unless_the_call_gives_them() -> None:
    with DAG("context_names") as d:
        load(extract())  # ds, ti, dag_run and params come from the worker
        stamp.override(task_id="given")("2025-01-01")  # a call may give a context name, by position
        stamp.override(task_id="by_name")(ds="2025-01-02")  # or by name
    spec = d.to_spec()
    calls = {t.task_id: t.python for t in spec.tasks}
    assert len(calls["load"].args) == 1 and not calls["load"].kwargs
    assert calls["given"].args[0].literal.string_value == "2025-01-01"
    assert calls["by_name"].kwargs["ds"].literal.string_value == "2025-01-02"


def test_params_and_context_cannot_be_given_by_a_call_by_name_or_position() -> None:
    with DAG("by_name"), pytest.raises(DagDefinitionError, match="params is passed by the worker"):
        stamp("2025-01-01", params={"a": 1})
    with DAG("by_position"), pytest.raises(DagDefinitionError, match="params is passed by the worker"):
        load([1], "2025-01-01", None, None, {"a": 1})
    with DAG("unknown"), pytest.raises(DagDefinitionError, match="missing a required argument: 'rows'"):
        load()


def test_the_context_is_exported_from_the_sdk() -> None:
    assert schedd_sdk.get_current_context is get_current_context is task_context.get_current_context
    assert {"TaskContext", "TaskInstanceInfo", "DagRunInfo", "NoTaskContext", "get_current_context"} <= set(
        schedd_sdk.__all__
    )
    hints = get_type_hints(TaskContext)
    assert hints["ds"] is str and hints["try_number"] is int and hints["ti"] is schedd_sdk.TaskInstanceInfo


def test_file_sensor_takes_airflows_filepath_as_well_as_path() -> None:
    @dag
    def sensing() -> None:
        FileSensor("/data/ready", task_id="by_path")
        FileSensor(filepath="/data/ready", task_id="by_filepath")

    by_id = {t.task_id: t for t in sensing().to_spec().tasks}
    assert by_id["by_filepath"].python == by_id["by_path"].python
    assert by_id["by_filepath"].python.kwargs["path"].literal.string_value == "/data/ready"

    @dag
    def both() -> None:
        FileSensor("/a", filepath="/b", task_id="f")

    with pytest.raises(DagDefinitionError, match=r"give the file as path or as filepath .*, not both"):
        both()

    @dag
    def neither() -> None:
        FileSensor(task_id="f")

    with pytest.raises(DagDefinitionError, match="path must not be empty"):
        neither()
