"""Sensor options: ``@task.sensor`` and the built-in sensors compile to ``TaskSpec.sensor``, and bad
values are refused, by the SDK and by the server's validation (naming the field)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from schedctl.local_run import run_locally
from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.spec import validate_spec
from schedd_core.states import RunState, TaskState
from schedd_sdk import DagDefinitionError, dag, task
from schedd_sdk.builtin_sensors import ExternalTaskSensor, FileSensor, TimeSensor, file_exists, time_reached
from tests.unit.helpers import task as task_spec
from tests.unit.sdk_examples import sensors as examples

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def by_id() -> dict[str, pb.TaskSpec]:
    return {t.task_id: t for t in examples.sensing().to_spec().tasks}


def test_task_sensor_compiles_its_options() -> None:
    t = by_id()["rows_landed"]
    assert t.python.target == "tests.unit.sdk_examples.sensors:rows_landed"
    assert t.sensor.mode == pb.SENSOR_MODE_RESCHEDULE
    assert t.sensor.poke_interval.ToSeconds() == 30
    assert t.sensor.timeout.ToSeconds() == 3600
    assert t.sensor.soft_fail
    assert by_id()["load"].upstream == ["rows_landed"]
    assert not by_id()["load"].HasField("sensor")


def test_defaults_and_override() -> None:
    quick = by_id()["quick"]
    assert quick.sensor.mode == pb.SENSOR_MODE_POKE
    assert quick.sensor.poke_interval.ToSeconds() == 1
    assert not quick.sensor.HasField("timeout")


def test_builtin_sensors_compile_to_their_functions_with_the_dag_time_zone() -> None:
    tasks = by_id()
    assert tasks["file"].python.target == "schedd_sdk.builtin_sensors:file_exists"
    assert tasks["file"].python.kwargs["path"].literal.string_value == "/data/ready"
    assert tasks["file"].sensor.mode == pb.SENSOR_MODE_RESCHEDULE and tasks["file"].retries == 1
    assert tasks["file"].sensor.timeout.ToSeconds() == 7 * 86400, "Airflow's default timeout"
    assert tasks["at_six_thirty"].python.kwargs["timezone"].literal.string_value == "Europe/Berlin"
    assert tasks["at_six_thirty"].python.kwargs["target_time"].literal.string_value == "06:30:00"
    assert tasks["at_six_thirty_utc"].python.kwargs["timezone"].literal.string_value == "UTC"
    ingested = tasks["ingested"]
    assert ingested.python.target == "schedd_sdk.builtin_sensors:external_task_done"
    assert ingested.env["SCHEDD_API"] == "api.internal:50051"
    assert ingested.python.kwargs["external_dag_id"].literal.string_value == "ingest"


def test_outside_a_dag_a_sensor_pokes_once_and_returns_its_verdict(tmp_path: Path) -> None:
    assert examples.rows_landed("full") == {"is_done": True, "xcom_value": 4}
    assert examples.rows_landed("none") == {"is_done": False, "xcom_value": 4}
    assert examples.flag(True) == {"is_done": True, "xcom_value": None}
    assert asyncio.run(examples.flag_later(False)) == {"is_done": False, "xcom_value": None}
    assert file_exists(str(tmp_path)) == {"is_done": True, "xcom_value": None}
    assert file_exists(str(tmp_path / "missing"))["is_done"] is False
    assert time_reached("00:00", "UTC")["is_done"] is True


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"mode": "wait"}, "mode must be 'poke' or 'reschedule'"),
        ({"poke_interval": 0}, "poke_interval must be a positive"),
        ({"poke_interval": "1m"}, "poke_interval must be a positive"),
        ({"timeout": -1}, "timeout must be a positive"),
        ({"soft_fail": "yes"}, "soft_fail must be a bool"),
        ({"transactional": True}, "cannot be transactional"),
    ],
)
def test_bad_sensor_options_are_refused_when_decorating(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(DagDefinitionError, match=problem):
        task.sensor(**options)


def _define(body: Callable[[], object]) -> None:
    @dag
    def d() -> None:
        body()

    d()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (lambda: FileSensor("", task_id="f"), "path must not be empty"),
        (lambda: TimeSensor("25:00", task_id="t"), "target_time must be"),
        (lambda: TimeSensor("06:00", task_id="t", timezone="Mars/Olympus"), "not an IANA time zone"),
        (lambda: ExternalTaskSensor("x", "y", task_id="e", api="a:1", allowed_states=("done",)), "unknown"),
        (lambda: FileSensor("/x", task_id="f", mode="later"), "mode must be"),
    ],
)
def test_bad_builtin_sensor_arguments_are_refused(body: Callable[[], object], problem: str) -> None:
    with pytest.raises(DagDefinitionError, match=problem):
        _define(body)


def test_external_task_sensor_needs_an_api_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDD_API", raising=False)
    with pytest.raises(DagDefinitionError, match="api address"):
        _define(lambda: ExternalTaskSensor("x", "y", task_id="e"))


def sensor_task(**sensor: Any) -> pb.TaskSpec:
    spec = pb.SensorSpec(**{k: v for k, v in sensor.items() if k in ("mode", "soft_fail")})
    for name in ("poke_interval", "timeout"):
        if name in sensor:
            getattr(spec, name).CopyFrom(sensor[name])
    return task_spec("s", python=pb.PythonCallable(target="m:f"), sensor=spec)


def rejects(t: pb.TaskSpec, field: str, problem: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        validate_spec(pb.DagSpec(dag_id="d", tasks=[t]))
    assert (info.value.field, problem in info.value.problem) == (field, True), str(info.value)


def test_the_server_accepts_a_valid_sensor() -> None:
    validate_spec(
        pb.DagSpec(
            dag_id="d", tasks=[sensor_task(mode=pb.SENSOR_MODE_RESCHEDULE, poke_interval=Duration(seconds=5))]
        )
    )


def test_the_server_refuses_bad_sensor_options_naming_the_field() -> None:
    rejects(sensor_task(), "spec.tasks[0].sensor.poke_interval", "is required")
    rejects(
        sensor_task(poke_interval=Duration(seconds=0)),
        "spec.tasks[0].sensor.poke_interval",
        "must be positive",
    )
    rejects(
        sensor_task(poke_interval=Duration(seconds=1), timeout=Duration(seconds=-1)),
        "spec.tasks[0].sensor.timeout",
        "must be positive",
    )
    rejects(
        sensor_task(mode=7, poke_interval=Duration(seconds=1)), "spec.tasks[0].sensor.mode", "unknown mode 7"
    )
    shell = pb.TaskSpec(task_id="s", shell=pb.ShellCommand(command="true"))
    shell.sensor.poke_interval.FromSeconds(1)
    rejects(shell, "spec.tasks[0].sensor", "must be a Python task")
    branch = sensor_task(poke_interval=Duration(seconds=1))
    branch.branch = True
    rejects(branch, "spec.tasks[0].sensor", "a branch task cannot be a sensor")


def test_dags_test_runs_a_reschedule_mode_sensor_in_place(tmp_path: Path) -> None:
    """``schedctl dags test`` (one process, no slots) pokes a reschedule-mode sensor inside one attempt;
    a soft-fail sensor past its timeout is skipped."""

    def sensor(task_id: str, path: Path, **options: Any) -> pb.TaskSpec:
        t = task_spec(task_id, python=pb.PythonCallable(target="schedd_sdk.builtin_sensors:file_exists"))
        t.python.kwargs["path"].literal.string_value = str(path)
        t.sensor.mode = pb.SENSOR_MODE_RESCHEDULE
        t.sensor.poke_interval.FromMilliseconds(20)
        t.sensor.timeout.FromMilliseconds(300)
        t.sensor.soft_fail = options.get("soft_fail", False)
        return t

    (tmp_path / "here").touch()
    spec = pb.DagSpec(
        dag_id="d",
        tasks=[sensor("found", tmp_path / "here"), sensor("missing", tmp_path / "no", soft_fail=True)],
    )
    run = asyncio.run(
        run_locally(spec, conf={}, logical_date=datetime(2026, 1, 1, tzinfo=UTC), on_event=lambda _: None)
    )
    assert run.tasks == {"found": TaskState.SUCCESS, "missing": TaskState.SKIPPED}
    assert run.state is RunState.SUCCESS
