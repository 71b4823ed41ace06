"""``schedctl dags test`` gives tasks the context a cluster gives them: the data interval of the
scheduled run of ``--logical-date`` (cron and fixed-interval schedules), the run's conf, and the
api's refusals of a conf, with the api's messages. Through the CLI, tasks in a real warm child."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import app
from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_CONF_BYTES
from schedd_core.params import check_run_params
from schedd_rpc import convert
from schedd_sdk.loader import load_dags

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "tests" / "unit" / "sdk_examples" / "context_dags.py"


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # where workers run, so the task imports by its module path


def dags_test(dag_id: str, *args: str) -> Result:
    return CliRunner().invoke(app, ["dags", "test", str(DAGS), "--dag", dag_id, *args])


def context_of(run: Result) -> dict[str, Any]:
    assert run.exit_code == 0, run.output
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("[show] | context=")]
    value: dict[str, Any] = json.loads(line.removeprefix("[show] | context="))
    return value


def test_a_logical_date_on_a_daily_dag_gives_the_interval_of_its_scheduled_run() -> None:
    run = dags_test("daily", "--logical-date", "2025-03-04")
    assert (
        "dag daily: testing a run at 2025-03-04T00:00:00+00:00, the scheduled run of "
        "2025-03-04T00:00:00+00:00 .. 2025-03-05T00:00:00+00:00"
    ) in run.stdout
    context = context_of(run)
    assert {k: context[k] for k in ("ds", "ds_nodash", "ts", "ts_nodash", "current_ds")} == {
        "ds": "2025-03-04",
        "ds_nodash": "20250304",
        "ts": "2025-03-04T00:00:00+00:00",
        "ts_nodash": "20250304T000000",
        "current_ds": "2025-03-04",
    }
    assert context["data_interval_start"] == context["logical_date"] == "2025-03-04T00:00:00+00:00"
    assert (
        context["data_interval_end"] == context["dag_run"]["data_interval_end"] == "2025-03-05T00:00:00+00:00"
    )
    assert context["dag_run"] == {**context["dag_run"], "run_type": "scheduled", "conf": {}}
    assert (context["dag_id"], context["task_id"], context["map_index"], context["try_number"]) == (
        "daily",
        "show",
        -1,
        1,
    )
    assert context["run_id"] == "test__2025-03-04T00:00:00+00:00" and context["ti"]["attempt_id"]
    assert context["params"] == {"rows": 10, "table": "t"}


def test_without_a_logical_date_the_run_is_manual_and_has_no_interval() -> None:
    context = context_of(dags_test("daily"))
    assert context["data_interval_start"] is None and context["data_interval_end"] is None
    assert context["dag_run"]["run_type"] == "manual"


def test_a_fixed_interval_schedule_and_a_date_given_with_an_offset() -> None:
    run = dags_test("six_hourly", "--logical-date", "2025-01-01T08:00:00+02:00")
    assert "testing a run at 2025-01-01T06:00:00+00:00, the scheduled run of" in run.stdout
    context = context_of(run)
    assert (context["data_interval_start"], context["data_interval_end"]) == (
        "2025-01-01T06:00:00+00:00",
        "2025-01-01T12:00:00+00:00",
    )
    assert context["ds"] == "2025-01-01" and context["ts_nodash"] == "20250101T060000"


@pytest.mark.parametrize(
    ("dag_id", "date", "message"),
    [
        ("six_hourly", "2025-01-01T07:00:00Z", "the next one is 2025-01-01T12:00:00+00:00"),
        ("daily", "2025-03-04T12:00:00Z", "the next one is 2025-03-05T00:00:00+00:00"),
    ],
)
def test_a_logical_date_that_is_no_runs_of_the_schedule_exits_2(dag_id: str, date: str, message: str) -> None:
    run = dags_test(dag_id, "--logical-date", date)
    assert run.exit_code == 2
    assert "is not the logical date of a run of the DAG's schedule" in " ".join(run.output.split())
    assert message in " ".join(run.output.split())


def test_the_runs_conf_reaches_dag_run_conf_as_the_cluster_stores_it() -> None:
    conf = '{"anything": 3.0, "nested": {"list": [1, "a"]}}'
    context = context_of(dags_test("six_hourly", "--conf", conf))
    assert context["dag_run"]["conf"] == {"anything": 3, "nested": {"list": [1, "a"]}}
    assert context["params"] == context["dag_run"]["conf"]  # no declared params: the conf is all


def _api_refusal(dag_id: str, conf: dict[str, Any]) -> str:
    """The message the api refuses ``conf`` with, from the api's own checks."""
    size = convert.struct(conf).ByteSize()
    if size > MAX_CONF_BYTES:
        return f"conf: is {size} bytes; the limit is {MAX_CONF_BYTES}"
    (spec,) = [s for s in load_dags(DAGS) if s.dag_id == dag_id]
    with pytest.raises(InvalidArgument) as refused:
        check_run_params(spec, conf)
    return str(refused.value)


@pytest.mark.parametrize(
    ("dag_id", "conf"),
    [
        ("daily", {"rows": "many"}),
        ("daily", {"extra": 1}),
        ("required", {}),
        ("six_hourly", {"numbers": [1] * 12000}),  # 24 KB of JSON, over 64 KiB as the api receives it
    ],
    ids=["wrong_type", "undeclared", "missing_required", "too_big_for_the_api"],
)
def test_a_conf_the_api_refuses_exits_2_with_the_apis_message(dag_id: str, conf: dict[str, Any]) -> None:
    run = dags_test(dag_id, "--conf", json.dumps(conf))
    assert run.exit_code == 2, run.output
    assert _api_refusal(dag_id, conf) in " ".join(run.output.split())
