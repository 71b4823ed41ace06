"""Sensors through the real services: reschedule-mode sensors hold no slot while they wait.

The cluster has two workers: ``one-slot`` (capacity 1, queue ``default``) and ``two-slots``
(capacity 2, queue ``many``). Every DAG is a YAML spec registered with ``schedctl``; what happened
is read back from PostgreSQL (``task_instances``, ``task_attempts``). Conditions are files a test
creates when it decides; waits poll with generous bounds, and no assertion is about speed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from schedd_devstack.postgres import create_database, drop_database, with_database
from schedd_devstack.services import Cluster
from tests.e2e.test_semantics import LIVENESS, REPO, Env, HookServer, gated, max_overlap, sh
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

FILE_SENSOR = "schedd_sdk.builtin_sensors:file_exists"
EXTERNAL_TASK_SENSOR = "schedd_sdk.builtin_sensors:external_task_done"
MARKER_TEXT = "tests.e2e.sensor_tasks:marker_text"


@contextmanager
def sensors_env(
    database_url: str, etcd_endpoints: str, work: Path, workers: Sequence[tuple[str, int, dict[str, str]]]
) -> Iterator[Env]:
    """A cluster on a new database (dropped afterwards) with the given workers (id, capacity, env)."""
    name = f"t_{secrets.token_hex(8)}"
    create_database(database_url, name)
    url = with_database(database_url, name)
    hook = HookServer()
    cluster = Cluster(url, etcd_endpoints, work / "logs", workers=0, cwd=REPO)
    try:
        began = time.monotonic()
        cluster.start()
        for worker_id, capacity, worker_env in workers:
            cluster.add_worker(worker_id, capacity=capacity, env=worker_env)
        running = RunningCluster(cluster, url, work / "logs", time.monotonic() - began)
        yield Env(running, work, work / "events.jsonl", hook)
        running.assert_healthy()
    finally:
        cluster.stop()
        hook.server_close()
        drop_database(database_url, name)
    assert not [p for p in cluster.processes if p.alive], "processes left running"


@pytest.fixture(scope="module")
def env(database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workers = [("one-slot", 1, {}), ("two-slots", 2, {"SCHEDD_WORKER_QUEUES": "many"})]
    with sensors_env(database_url, etcd_endpoints, tmp_path_factory.mktemp("sensors"), workers) as running:
        yield running


def file_sensor(task_id: str, path: Path, *upstream: str, **sensor: Any) -> dict[str, Any]:
    """A reschedule-mode ``FileSensor`` task (what ``schedd_sdk.builtin_sensors.FileSensor`` compiles to)."""
    return {
        "task_id": task_id,
        "upstream": list(upstream),
        "python": {"target": FILE_SENSOR, "kwargs": {"path": {"literal": str(path)}}},
        "sensor": {"mode": "SENSOR_MODE_RESCHEDULE", "poke_interval": "0.2s", "timeout": "300s", **sensor},
    }


def sensor_attempts(env: Env, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
    return env.attempts(dag_id, run_id, task_id)


def test_a_waiting_reschedule_sensor_holds_no_slot_and_succeeds_in_its_first_try(env: Env) -> None:
    marker = env.work / "landed"
    env.register(
        {"dag_id": "sense_file", "tasks": [file_sensor("wait", marker), sh("after", "true", "wait")]}
    )
    env.register({"dag_id": "sense_other", "tasks": [sh("work", "true")]})
    env.trigger("sense_file", "r1")

    env.wait_for(
        "the sensor to have poked and been rescheduled twice",
        lambda: (
            sum(a["state"] == "rescheduled" for a in sensor_attempts(env, "sense_file", "r1", "wait")) >= 2
        ),
    )
    env.wait_state("sense_file", "r1", "wait", "up_for_reschedule")

    def explained_wait() -> str | None:
        out = env.ok("explain", "sense_file/r1", "wait")
        return out if "waiting for its next poke at" in out else None

    explained = env.wait_for("explain to say the sensor waits for its next poke", explained_wait)
    assert "up_for_reschedule" in explained

    # The only worker of queue default has one slot: the other DAG's task runs while the sensor waits.
    env.trigger("sense_other", "r1")
    assert env.wait_run("sense_other", "r1")["state"] == "success"
    assert not marker.exists()
    assert env.tis("sense_file", "r1")["wait"]["state"] in ("up_for_reschedule", "queued", "running")
    assert env.run("sense_file", "r1")["state"] == "running", "a run does not finish while a sensor waits"

    marker.write_text("ready\n")
    assert env.wait_run("sense_file", "r1")["state"] == "success"
    tis = env.tis("sense_file", "r1")
    assert (tis["wait"]["state"], tis["wait"]["try_number"]) == ("success", 1)
    assert tis["after"]["state"] == "success"
    attempts = sensor_attempts(env, "sense_file", "r1", "wait")
    assert {a["try_number"] for a in attempts} == {1}, "a reschedule uses up no try"
    assert [a["state"] for a in attempts][-1] == "success"
    assert all(a["state"] == "rescheduled" for a in attempts[:-1])
    assert len(attempts) >= 3


def test_the_sensor_value_is_the_task_result(env: Env) -> None:
    marker = env.work / "valued"
    env.register(
        {
            "dag_id": "sense_value",
            "params": {"marker": str(marker)},
            "tasks": [
                {
                    "task_id": "wait",
                    "python": {"target": MARKER_TEXT},
                    "sensor": {"mode": "SENSOR_MODE_POKE", "poke_interval": "0.1s", "timeout": "300s"},
                }
            ],
        }
    )
    env.trigger("sense_value", "r1")
    env.wait_state("sense_value", "r1", "wait", "running")
    marker.write_text("forty-two\n")
    assert env.wait_run("sense_value", "r1")["state"] == "success"
    result = env.cluster.fetchval(
        "SELECT ti.result #>> '{}' FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'sense_value' AND r.run_id = 'r1' AND ti.task_id = 'wait'"
    )
    assert result == "forty-two"
    attempts = sensor_attempts(env, "sense_value", "r1", "wait")
    assert [(a["try_number"], a["state"]) for a in attempts] == [(1, "success")], "poke mode: one attempt"


def test_a_sensor_past_its_timeout_fails_without_retries_or_with_soft_fail_is_skipped(env: Env) -> None:
    never = env.work / "never"
    env.register(
        {
            "dag_id": "sense_timeout",
            "tasks": [
                {**file_sensor("hard", never, timeout="1s"), "retries": 2},
                {**file_sensor("soft", never, timeout="1s", soft_fail=True), "retries": 2},
                sh("after_soft", "true", "soft"),
            ],
        }
    )
    env.trigger("sense_timeout", "r1")
    assert env.wait_run("sense_timeout", "r1")["state"] == "failed"
    tis = env.tis("sense_timeout", "r1")
    assert (tis["hard"]["state"], tis["hard"]["try_number"]) == ("failed", 1), (
        "a sensor timeout is not retried"
    )
    assert "timeout" in tis["hard"]["error"]
    assert tis["soft"]["state"] == "skipped"
    assert tis["after_soft"]["state"] == "skipped"
    soft = sensor_attempts(env, "sense_timeout", "r1", "soft")
    assert soft[-1]["state"] == "skipped" and {a["try_number"] for a in soft} == {1}
    assert not never.exists()


def test_fifty_waiting_sensors_need_no_more_than_two_slots(env: Env) -> None:
    gate = env.work / "gate"
    count = 50
    env.pool("sensing", 2)
    env.register(
        {
            "dag_id": "sense_many",
            "tasks": [
                {**file_sensor(f"s{i:02d}", gate, poke_interval="0.5s"), "queue": "many", "pool": "sensing"}
                for i in range(count)
            ],
        }
    )
    env.trigger("sense_many", "r1")

    def poked_all() -> bool:
        attempts = env.attempts("sense_many", "r1")
        return len({a["task_id"] for a in attempts if a["state"] == "rescheduled"}) == count

    # With two worker slots and two pool slots, fifty sensors that held a slot while waiting could
    # never all have poked.
    env.wait_for("every sensor to have poked once and been rescheduled", poked_all, timeout=LIVENESS * 4)
    gate.write_text("open\n")
    assert env.wait_run("sense_many", "r1", timeout=LIVENESS * 4)["state"] == "success"
    tis = env.tis("sense_many", "r1")
    assert {(t["state"], t["try_number"]) for t in tis.values()} == {("success", 1)}
    attempts = env.attempts("sense_many", "r1")
    intervals = [(a["started_at"], a["ended_at"]) for a in attempts]
    assert all(s is not None and e is not None for s, e in intervals)
    assert max_overlap(intervals) <= 2, "the worker of queue many has two slots, the pool two"


def test_an_external_task_sensor_waits_for_the_other_dags_task_through_the_api(env: Env) -> None:
    # Each run's load waits for a file named after its run id (the shell expands SCHEDD_RUN_ID).
    env.register({"dag_id": "ext_ingest", "tasks": [sh("load", gated(env.work / "gate_$SCHEDD_RUN_ID"))]})
    arguments = {
        "external_dag_id": {"literal": "ext_ingest"},
        "external_task_id": {"literal": "load"},
        "allowed_states": {"literal": ["success"]},
        "failed_states": {"literal": ["failed"]},
    }
    env.register(
        {
            "dag_id": "ext_report",
            "tasks": [
                {
                    "task_id": "ingested",
                    "queue": "many",
                    "python": {"target": EXTERNAL_TASK_SENSOR, "kwargs": arguments},
                    "env": {"SCHEDD_API": env.cluster.api_address},
                    "sensor": {"mode": "SENSOR_MODE_RESCHEDULE", "poke_interval": "0.3s", "timeout": "300s"},
                }
            ],
        }
    )
    same_day, other_day = "2026-03-01T00:00:00+00:00", "2026-03-02T00:00:00+00:00"
    (env.work / "gate_other_day").write_text("open\n")
    env.ok("runs", "trigger", "ext_ingest", "--run-id", "other_day", "--logical-date", other_day)
    assert env.wait_run("ext_ingest", "other_day")["state"] == "success"
    env.ok("runs", "trigger", "ext_ingest", "--run-id", "same_day", "--logical-date", same_day)
    env.ok("runs", "trigger", "ext_report", "--run-id", "r1", "--logical-date", same_day)

    env.wait_for(
        "the external task sensor to poke twice",
        lambda: sum(a["state"] == "rescheduled" for a in env.attempts("ext_report", "r1", "ingested")) >= 2,
    )
    assert env.states("ext_ingest", "same_day")["load"] == "running"
    assert env.tis("ext_report", "r1")["ingested"]["state"] != "success", (
        "another day's success does not count"
    )

    (env.work / "gate_same_day").write_text("open\n")
    assert env.wait_run("ext_ingest", "same_day")["state"] == "success"
    assert env.wait_run("ext_report", "r1")["state"] == "success"
    assert env.tis("ext_report", "r1")["ingested"]["try_number"] == 1
