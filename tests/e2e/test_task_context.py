"""The task context on a real cluster: a TaskFlow DAG whose tasks declare Airflow's context names
(``ds``, ``logical_date``, ``data_interval_start``, ``ti``, ``dag_run``...) and call
``get_current_context()``, run by a backfill of two days and by a manual run with a conf; the values
each task stored are compared with the run's row. ``schedctl dags test`` of the same DAG and date
gives the same values, and refuses the confs the api refuses with the api's messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.services import RunningCluster
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

LIVENESS = 180.0

WORK = """\
import json
from datetime import datetime

from schedd_sdk import get_current_context, task


def _text(value):
    return value.isoformat() if isinstance(value, datetime) else value


@task
def report(ds, ds_nodash, ts, ts_nodash, logical_date, data_interval_start, data_interval_end, run_id,
           dag_id, task_id, map_index, try_number, ti, dag_run, params, context):
    current = get_current_context()
    values = {
        "ds": ds, "ds_nodash": ds_nodash, "ts": ts, "ts_nodash": ts_nodash,
        "logical_date": _text(logical_date), "data_interval_start": _text(data_interval_start),
        "data_interval_end": _text(data_interval_end), "run_id": run_id, "dag_id": dag_id,
        "task_id": task_id, "map_index": map_index, "try_number": try_number, "params": params,
        "ti": {"run_id": ti.run_id, "try_number": ti.try_number, "attempt_id": ti.attempt_id,
               "map_index": ti.map_index},
        "attempt_env": context["SCHEDD_ATTEMPT_ID"],
        "dag_run": {"run_type": dag_run.run_type, "conf": dag_run.conf,
                    "logical_date": _text(dag_run.logical_date),
                    "data_interval_end": _text(dag_run.data_interval_end)},
        "current": {"ds": current["ds"], "run_id": current["ti"].run_id},
    }
    print("context=" + json.dumps(values, sort_keys=True))
    return values


@task
def numbers():
    return [10, 20]


@task
def per_item(n, map_index, ti):
    return {"n": n, "map_index": map_index, "ti_map_index": ti.map_index}


@task
def combine(items, ds):
    return {"items": items, "ds": ds, "current_ds": get_current_context()["ds"]}
"""

FLOW = """\
from datetime import datetime

import ctx_work
from schedd_sdk import Param, dag


@dag(
    dag_id="ctx_daily",
    schedule="@daily",
    start_date=datetime(2030, 1, 1),  # no scheduled run while the test runs: only its own
    params={"rows": Param(5, type="integer")},
)
def ctx_daily():
    ctx_work.report()
    ctx_work.combine(ctx_work.per_item.expand(n=ctx_work.numbers()))
"""

RESULTS = """
SELECT r.run_id, r.run_type, r.logical_date, r.data_interval_start, r.data_interval_end,
       ti.task_id, ti.map_index, ti.state, ti.result, ti.attempt_id::text AS attempt_id
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = 'ctx_daily'
"""


def ok(done: Any) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return str(done.stdout)


def dags_test(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``schedctl dags test ctx_flow.py ARGS`` run in ``directory``, as from a DAG repository's root (the
    task module imports from there, as workers import it from the DAG's code bundle)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")}
    return subprocess.run(
        [sys.executable, "-m", "schedctl.main", "dags", "test", "ctx_flow.py", *args],
        cwd=directory,
        env={**env, "COLUMNS": "400", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=LIVENESS,
        check=False,
    )


def write_dag(directory: Path) -> Path:
    (directory / "ctx_work.py").write_text(WORK)
    (directory / "ctx_flow.py").write_text(FLOW)
    return directory / "ctx_flow.py"


def rows_by_run(cluster: RunningCluster) -> dict[str, dict[str, dict[str, Any]]]:
    """Every task instance of the DAG, by run id and task key, with its stored result parsed."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for row in cluster.fetch(RESULTS):
        key = row["task_id"] if row["map_index"] < 0 else f"{row['task_id']}[{row['map_index']}]"
        result = json.loads(row["result"]) if row["result"] is not None else None
        runs.setdefault(row["run_id"], {})[key] = {**row, "result": result}
    return runs


def run_backfill(cluster: RunningCluster, start: str, end: str) -> None:
    """Backfill the DAG from ``start`` to ``end`` and wait (bounded) for it to succeed."""
    created = json.loads(
        ok(cluster.schedctl("-o", "json", "backfill", "create", "ctx_daily", "--start", start, "--end", end))
    )
    state: dict[str, Any] = {}

    def ended() -> bool:
        state.update(json.loads(ok(cluster.schedctl("-o", "json", "backfill", "get", created["name"]))))
        return state["state"] in ("succeeded", "failed", "cancelled")

    wait_until("the backfill to end", ended, LIVENESS, interval=0.2)
    assert state["state"] == "succeeded", state


def check_backfill_day(tasks: dict[str, dict[str, Any]], day: datetime) -> dict[str, Any]:
    """The context every task of the backfill run of ``day`` saw; returns what ``report`` stored."""
    assert all(t["state"] == "success" for t in tasks.values()), tasks
    row, got = tasks["report"], tasks["report"]["result"]
    assert (row["data_interval_start"], row["data_interval_end"]) == (day, day + timedelta(days=1))
    assert {k: got[k] for k in ("ds", "ds_nodash", "ts", "ts_nodash", "logical_date")} == {
        "ds": f"{day:%Y-%m-%d}",
        "ds_nodash": f"{day:%Y%m%d}",
        "ts": day.isoformat(),
        "ts_nodash": f"{day:%Y%m%dT%H%M%S}",
        "logical_date": day.isoformat(),
    }
    end = (day + timedelta(days=1)).isoformat()
    assert (got["data_interval_start"], got["data_interval_end"]) == (day.isoformat(), end)
    assert got["run_id"] == got["ti"]["run_id"] == got["current"]["run_id"] == row["run_id"]
    assert (got["dag_id"], got["task_id"], got["map_index"], got["try_number"]) == (
        "ctx_daily",
        "report",
        -1,
        1,
    )
    assert got["ti"]["attempt_id"] == got["attempt_env"] == row["attempt_id"]
    assert got["dag_run"] == {
        "run_type": "backfill",
        "conf": {},
        "logical_date": day.isoformat(),
        "data_interval_end": end,
    }
    assert got["params"] == {"rows": 5} and got["current"]["ds"] == got["ds"]
    # mapped instances know their index; a task given an upstream value gets the context names too
    assert [tasks[f"per_item[{i}]"]["result"] for i in (0, 1)] == [
        {"n": 10, "map_index": 0, "ti_map_index": 0},
        {"n": 20, "map_index": 1, "ti_map_index": 1},
    ]
    assert tasks["combine"]["result"]["ds"] == tasks["combine"]["result"]["current_ds"] == got["ds"]
    result: dict[str, Any] = got
    return result


def test_tasks_get_the_context_of_backfill_and_manual_runs_and_dags_test_agrees(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    flow = write_dag(tmp_path)
    ok(module_cluster.schedctl("dags", "register", str(flow)))
    run_backfill(module_cluster, "2025-03-04", "2025-03-05")
    trigger = ("runs", "trigger", "ctx_daily", "--run-id", "by_hand", "--conf", '{"rows": 3.0}', "--wait")
    ok(module_cluster.schedctl(*trigger, timeout=LIVENESS))

    runs = rows_by_run(module_cluster)
    backfills = {
        r["report"]["logical_date"]: r for r in runs.values() if r["report"]["run_type"] == "backfill"
    }
    day = datetime(2025, 3, 4, tzinfo=UTC)
    assert sorted(backfills) == [day, day + timedelta(days=1)]
    got = check_backfill_day(backfills[day], day)
    check_backfill_day(backfills[day + timedelta(days=1)], day + timedelta(days=1))

    by_hand = runs["by_hand"]["report"]["result"]
    assert by_hand["dag_run"]["run_type"] == "manual" and by_hand["dag_run"]["conf"] == {"rows": 3}
    assert by_hand["data_interval_start"] is None and by_hand["data_interval_end"] is None
    assert by_hand["params"] == {"rows": 3}

    # dags test of the same DAG and date: the cluster's values, but for what names its run and attempt
    # (dags test's run is the scheduled run of the day, the cluster's a backfill run)
    local = ok(dags_test(tmp_path, "--logical-date", "2025-03-04"))
    assert local.splitlines()[-1].endswith(": success"), local
    assert "the scheduled run of 2025-03-04T00:00:00+00:00 .. 2025-03-05T00:00:00+00:00" in local
    (line,) = [line for line in local.splitlines() if line.startswith("[report] | context=")]
    printed = json.loads(line.removeprefix("[report] | context="))
    own = ("run_id", "ti", "attempt_env", "current")
    assert {k: v for k, v in printed.items() if k not in own} == {
        **{k: v for k, v in got.items() if k not in own},
        "dag_run": {**got["dag_run"], "run_type": "scheduled"},
    }


@pytest.mark.parametrize(
    ("conf", "refused_by"),
    [({"rows": "many"}, "api"), ({"unknown": 1}, "api"), ({"numbers": [1] * 12000}, "schedctl")],
    ids=["wrong_type", "undeclared", "too_big"],
)
def test_dags_test_refuses_a_conf_the_cluster_refuses_with_the_same_message(
    module_cluster: RunningCluster, tmp_path: Path, conf: dict[str, Any], refused_by: str
) -> None:
    """The same refusal, word for word: from the api for what only it knows (the params), and from
    schedctl itself, before sending, for a conf over the api's size limit (measured as the api does)."""
    flow = write_dag(tmp_path)
    ok(module_cluster.schedctl("dags", "register", str(flow)))
    text = json.dumps(conf)
    refused = module_cluster.schedctl("runs", "trigger", "ctx_daily", "--run-id", "refused", "--conf", text)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    local = dags_test(tmp_path, "--conf", text)
    assert local.returncode == 2, local.stdout + local.stderr
    message = local.stderr.strip().removeprefix("error: ")
    assert message.startswith("conf" if refused_by == "api" else "--conf"), message
    prefix = "INVALID_ARGUMENT: " if refused_by == "api" else ""
    assert refused.stderr.strip() == f"error: {prefix}{message}"
