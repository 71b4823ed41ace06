"""Assets in Python DAGs compile to the spec's outlets, inlets and asset schedule."""

from __future__ import annotations

from datetime import datetime

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.spec import validate_spec
from schedd_sdk import (
    DAG,
    Asset,
    AssetAll,
    AssetAny,
    AssetOrTimeSchedule,
    CronTriggerTimetable,
    DagDefinitionError,
    shell,
)
from schedd_sdk.compile import compile_dag
from tests.asset_conditions import all_of, any_of, one


def test_tasks_declare_outlets_and_inlets_and_dags_are_scheduled_on_conditions() -> None:
    orders, users = Asset("s3://lake/orders"), Asset("s3://lake/users", name="users")
    with DAG("report", schedule=orders & (users | Asset("s3://lake/x"))) as dag:
        shell("true", task_id="t", outlets=[Asset("s3://lake/report")], inlets=[orders, "s3://lake/y"])
    spec = compile_dag(dag)
    validate_spec(spec)
    expected = all_of(one("s3://lake/orders"), any_of(one("s3://lake/users"), one("s3://lake/x")))
    expected.all.conditions[1].any.conditions[0].asset.name = "users"
    assert spec.asset_schedule == expected
    assert [r.uri for r in spec.tasks[0].outlets] == ["s3://lake/report"]
    assert [r.uri for r in spec.tasks[0].inlets] == ["s3://lake/orders", "s3://lake/y"]
    assert spec.schedule == ""


def test_an_asset_or_time_schedule_sets_both() -> None:
    schedule = AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 3 * * *", timezone="Europe/Berlin"), assets=AssetAny(Asset("a://x"))
    )
    with DAG("either", schedule=schedule, start_date=datetime(2025, 1, 1)) as dag:
        shell("true", task_id="t")
    spec = compile_dag(dag)
    validate_spec(spec)
    assert (spec.schedule, spec.cron_semantics, spec.timezone) == (
        "0 3 * * *",
        pb.CRON_SEMANTICS_TRIGGER,
        "Europe/Berlin",
    )
    assert spec.asset_schedule == any_of(one("a://x"))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Asset(""), "uri must be a non-empty string"),
        (lambda: AssetAll(), "needs assets or asset conditions"),
        (lambda: AssetOrTimeSchedule(timetable=Asset("a://x"), assets=Asset("a://x")), "must be a timetable"),
    ],
)
def test_bad_asset_objects_are_refused(make: object, message: str) -> None:
    with pytest.raises(DagDefinitionError, match=message):
        make()  # type: ignore[operator]


def test_outlets_must_be_a_list_of_assets() -> None:
    with DAG("bad") as _, pytest.raises(DagDefinitionError, match="outlets: expected a list of assets"):
        shell("true", task_id="t", outlets=Asset("a://x"))  # type: ignore[arg-type]
