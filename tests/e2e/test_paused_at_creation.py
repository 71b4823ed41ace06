"""A new DAG starts paused, as Airflow's ``dags_are_paused_at_creation``: registering a DAG with a
past start date and catch-up makes no run until it is unpaused; ``register --unpause`` opts out; a
DAG registered again keeps its paused state. On a cluster of its own, whose api keeps its default."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli_steps import RUN_DEADLINE, as_json, ok, register, runs_of
from tests.fixtures.services import RunningCluster, cluster_on_own_database
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def paused_default(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningCluster]:
    """A cluster whose api keeps its own default: new DAGs start paused."""
    log_dir = tmp_path_factory.mktemp("paused_default")
    with cluster_on_own_database(
        database_url, etcd_endpoints, log_dir, workers=1, dags_paused_at_creation=True
    ) as cluster:
        yield RunningCluster(cluster, cluster.database_url, log_dir, 0.0)


def daily_since_last_year(dag_id: str, command: str = "true") -> dict[str, Any]:
    start = (datetime.now(UTC) - timedelta(days=365)).replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "dag_id": dag_id,
        "schedule": "@daily",
        "catchup": True,
        "max_active_runs": 2,
        "start_date": start.isoformat().replace("+00:00", "Z"),
        "tasks": [{"task_id": "t", "shell": {"command": command}}],
    }


def test_a_new_dag_starts_paused_and_makes_no_catch_up_run(
    paused_default: RunningCluster, tmp_path: Path
) -> None:
    printed = register(paused_default, tmp_path, daily_since_last_year("life_paused"))
    assert "life_paused is new and paused" in printed
    eager = register(paused_default, tmp_path, daily_since_last_year("life_eager"), "--unpause")
    assert "life_eager is new and unpaused" in eager
    # The unpaused DAG's catch-up shows the leader planned schedules; the paused one got nothing.
    wait_until(
        "the unpaused DAG's catch-up runs",
        lambda: runs_of(paused_default, "life_eager") > 0,
        RUN_DEADLINE,
        interval=0.1,
    )
    assert runs_of(paused_default, "life_paused") == 0
    assert as_json(paused_default, "dags", "get", "life_paused")["paused"] is True
    # Registering again keeps the DAG's paused state, whatever --unpause says.
    changed = daily_since_last_year("life_paused", "echo changed")
    assert "is new" not in register(paused_default, tmp_path, changed, "--unpause")
    assert as_json(paused_default, "dags", "get", "life_paused")["paused"] is True
    ok(paused_default, "dags", "pause", "life_eager")
