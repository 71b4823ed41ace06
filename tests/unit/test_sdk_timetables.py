"""The SDK's timetable classes (Airflow 3's names): the spec fields each compiles to, the time zone
it brings, and the server's checks naming the field, run before anything is sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.timetable_spec import timetable_of
from schedd_sdk import (
    DAG,
    ContinuousTimetable,
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DagDefinitionError,
    DagValidationError,
    DeltaDataIntervalTimetable,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
    OnceTimetable,
    shell,
)
from schedd_sdk.timetables import Timetable

START = datetime(2024, 1, 1, tzinfo=UTC)


def compiled(schedule: str | timedelta | Timetable, **options: object) -> pb.DagSpec:
    with DAG("d", schedule=schedule, start_date=START, **options) as d:  # type: ignore[arg-type]
        shell("true", task_id="a")
    return d.to_spec()


def test_each_timetable_class_compiles_to_its_timetable() -> None:
    kinds = {
        "cron": CronDataIntervalTimetable("0 3 * * *"),
        "interval": DeltaDataIntervalTimetable(timedelta(hours=6)),
        "cron_trigger": CronTriggerTimetable("0 3 * * *"),
        "multiple_cron_trigger": MultipleCronTriggerTimetable("0 3 * * *", "30 12 * * 1"),
        "delta_trigger": DeltaTriggerTimetable(timedelta(minutes=10)),
        "events": EventsTimetable([START + timedelta(days=3)]),
        "once": OnceTimetable(),
        "continuous": ContinuousTimetable(),
    }
    assert {kind: timetable_of(compiled(t)).kind for kind, t in kinds.items()} == {k: k for k in kinds}
    assert timetable_of(compiled("0 3 * * *")).kind == "cron"  # a plain string: the deployment decides
    assert compiled("0 3 * * *").cron_semantics == pb.CRON_SEMANTICS_UNSPECIFIED


def test_a_cron_trigger_carries_its_interval_run_immediately_and_time_zone() -> None:
    spec = compiled(
        CronTriggerTimetable(
            "0 3 * * *",
            timezone="Europe/Berlin",
            interval=timedelta(hours=1),
            run_immediately=timedelta(minutes=30),
        )
    )
    assert (spec.schedule, spec.cron_semantics, spec.timezone) == (
        "0 3 * * *",
        pb.CRON_SEMANTICS_TRIGGER,
        "Europe/Berlin",
    )
    assert spec.trigger_options.interval.ToTimedelta() == timedelta(hours=1)
    assert spec.trigger_options.run_immediately_within.ToTimedelta() == timedelta(minutes=30)
    first = timetable_of(spec).first_interval()
    assert first is not None and first.logical_date == datetime(2024, 1, 1, 2, tzinfo=UTC)  # 03:00 CET
    assert compiled(CronTriggerTimetable("@daily", timezone=ZoneInfo("Asia/Tokyo"))).timezone == "Asia/Tokyo"


def test_naive_event_dates_are_read_in_the_dags_time_zone() -> None:
    spec = compiled(
        EventsTimetable([datetime(2024, 4, 5, 8, 27)], restrict_to_events=True), timezone="America/Chicago"
    )
    assert [e.ToDatetime(tzinfo=UTC) for e in spec.trigger.events] == [
        datetime(2024, 4, 5, 13, 27, tzinfo=UTC)
    ]
    assert spec.trigger.restrict_to_events


def test_a_timetable_zone_that_contradicts_the_dags_is_refused() -> None:
    with pytest.raises(DagDefinitionError, match="differs from the schedule's 'Asia/Tokyo'"):
        compiled(CronTriggerTimetable("@daily", timezone="Asia/Tokyo"), timezone="Europe/Berlin")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: MultipleCronTriggerTimetable(), "at least one cron"),
        (lambda: CronTriggerTimetable("0 3 * * *", run_immediately="yes"), "run_immediately"),  # type: ignore[arg-type]
        (lambda: DeltaTriggerTimetable(600), "expected a timedelta"),  # type: ignore[arg-type]
        (lambda: EventsTimetable([]), "one or more datetimes"),
    ],
)
def test_malformed_timetables_are_refused_where_they_are_made(make: object, message: str) -> None:
    with pytest.raises(DagDefinitionError, match=message):
        make()  # type: ignore[operator]


def test_the_servers_checks_name_the_field_before_anything_is_sent() -> None:
    with pytest.raises(DagValidationError, match=r"spec\.trigger\.crons\[1\]"):
        compiled(MultipleCronTriggerTimetable("0 3 * * *", "61 * * * *"))
    with pytest.raises(DagValidationError, match=r"spec\.max_active_runs"):
        compiled(ContinuousTimetable(), max_active_runs=3)
