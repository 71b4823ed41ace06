"""1,000 waiting reschedule-mode sensors on 4 workers with 8 slots each do not block other work.

Through the real services: every sensor pokes once, finds its file missing and gives its slot back
(state up_for_reschedule, next poke a minute away), so while all of them wait no sensor holds a
worker or pool slot and another DAG's tasks (more of them than the workers have slots) run to the
end. Then the file appears and the sensors' run ends. Waits poll with generous bounds; no assertion
is about speed (``make bench``, group ``sensors``, measures it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_semantics import Env, sh
from tests.e2e.test_sensors import file_sensor, sensors_env

pytestmark = pytest.mark.e2e

SENSORS = 1000
WORKERS = 4
SLOTS = 8
#: Long enough that no sensor pokes again while the other DAG runs.
POKE_INTERVAL = "300s"


@pytest.fixture(scope="module")
def env(database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workers: list[tuple[str, int, dict[str, str]]] = [(f"w{i}", SLOTS, {}) for i in range(WORKERS)]
    work = tmp_path_factory.mktemp("sensors-at-scale")
    with sensors_env(database_url, etcd_endpoints, work, workers) as running:
        yield running


def count(env: Env, query: str) -> int:
    return int(env.cluster.fetchval(query))


def test_a_thousand_waiting_sensors_hold_no_slot_and_other_work_runs(env: Env, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    sensors = [
        file_sensor(f"s{i:04d}", gate, poke_interval=POKE_INTERVAL, timeout="3600s") for i in range(SENSORS)
    ]
    env.register({"dag_id": "many_sensors", "tasks": sensors})
    other_tasks = 3 * WORKERS * SLOTS
    env.register({"dag_id": "other_work", "tasks": [sh(f"t{i}", "true") for i in range(other_tasks)]})
    env.trigger("many_sensors", "wait")
    env.wait_for(
        "every sensor to have poked once and given its slot back",
        lambda: (
            count(
                env,
                "SELECT count(*) FROM task_instances WHERE dag_id = 'many_sensors' "
                "AND state = 'up_for_reschedule'",
            )
            == SENSORS
        ),
        timeout=300,
    )
    env.trigger("other_work", "r1")
    assert env.wait_run("other_work", "r1", timeout=300)["state"] == "success"
    # While the other DAG ran, no sensor was queued or running: none had poked a second time.
    assert (
        count(
            env,
            "SELECT count(*) FROM task_instances WHERE dag_id = 'many_sensors' "
            "AND state <> 'up_for_reschedule'",
        )
        == 0
    )
    assert (
        count(
            env,
            "SELECT count(*) FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id "
            "WHERE ti.dag_id = 'many_sensors'",
        )
        == SENSORS
    )
    assert env.run("many_sensors", "wait")["state"] == "running"
    gate.write_text("open\n")
    env.ok("tasks", "clear", "many_sensors/wait")  # poke now instead of in five minutes
    assert env.wait_run("many_sensors", "wait", timeout=300)["state"] == "success"
