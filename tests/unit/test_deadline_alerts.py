"""Deadline alerts, pure: when a run's deadline falls, which runs missed theirs and when the timer
looks next (at the earliest deadline to come, never on a tick); the spec's deadline and notification
targets are checked field by field; the SDK writes them as Airflow 3.1 does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import duration_pb2

from schedd.v1 import alerts_pb2, resources_pb2 as pb
from schedd_core.callback_spec import check_callback, check_deadline
from schedd_core.deadline_alerts import (
    LOGICAL_DATE,
    QUEUED_AT,
    WAKE_MARGIN,
    DeadlineRule,
    RunDeadline,
    deadline_rule,
    plan,
)
from schedd_core.errors import InvalidArgument
from schedd_sdk import DAG, Callback, DeadlineAlert, DeadlineReference, Notifier, shell
from schedd_sdk.errors import DagDefinitionError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_deadline_counts_from_the_reference() -> None:
    logical, queued = T0, T0 + timedelta(hours=1)
    assert DeadlineRule(LOGICAL_DATE, timedelta(minutes=5)).deadline(logical, queued) == T0 + timedelta(
        minutes=5
    )
    assert DeadlineRule(QUEUED_AT, timedelta(minutes=5)).deadline(logical, queued) == queued + timedelta(
        minutes=5
    )


def test_due_runs_are_missed_and_the_timer_wakes_at_the_next_deadline() -> None:
    deadlines = [
        RunDeadline(3, T0),
        RunDeadline(1, T0 - timedelta(seconds=1)),
        RunDeadline(2, T0 + timedelta(seconds=7)),
    ]
    decided = plan(T0, deadlines, idle_recheck=60)
    assert [d.run_pk for d in decided.missed] == [1, 3]
    assert decided.delay == pytest.approx(7 + WAKE_MARGIN)
    assert plan(T0, [], idle_recheck=60).delay == 60


@pytest.mark.parametrize(
    ("reference", "interval"), [("queued_at", timedelta(0)), ("nonsense", timedelta(seconds=1))]
)
def test_a_bad_rule_is_refused(reference: str, interval: timedelta) -> None:
    with pytest.raises(InvalidArgument):
        DeadlineRule(reference, interval)


def _spec_with(deadline: pb.DeadlineAlert) -> pb.DagSpec:
    return pb.DagSpec(dag_id="d", deadline=deadline)


def test_the_spec_deadline_is_checked_field_by_field() -> None:
    for interval in (None, duration_pb2.Duration(seconds=0), duration_pb2.Duration(seconds=400 * 86400)):
        with pytest.raises(InvalidArgument) as caught:
            check_deadline(_spec_with(pb.DeadlineAlert(interval=interval)))
        assert caught.value.field == "spec.deadline.interval"
    bad_target = pb.DeadlineAlert(
        interval=duration_pb2.Duration(seconds=5),
        callbacks=[pb.Callback(email=alerts_pb2.EmailTarget(to=["x"]))],
    )
    with pytest.raises(InvalidArgument) as caught:
        check_deadline(_spec_with(bad_target))
    assert caught.value.field == "spec.deadline.callbacks[0].email.to[0]"
    good = _spec_with(
        pb.DeadlineAlert(
            reference=alerts_pb2.DEADLINE_REFERENCE_QUEUED_AT, interval=duration_pb2.Duration(seconds=5)
        )
    )
    check_deadline(good)
    rule = deadline_rule(good)
    assert rule is not None and rule.reference == QUEUED_AT and rule.interval == timedelta(seconds=5)


@pytest.mark.parametrize(
    ("callback", "field"),
    [
        (pb.Callback(), "c"),
        (pb.Callback(webhook=alerts_pb2.WebhookTarget(url="ftp://x")), "c.webhook.url"),
        (
            pb.Callback(webhook=alerts_pb2.WebhookTarget(url="https://x", signing_connection="a b")),
            "c.webhook.signing_connection",
        ),
        (pb.Callback(email=alerts_pb2.EmailTarget(to=["a@b"], connection="")), "c.email.connection"),
        (
            pb.Callback(email=alerts_pb2.EmailTarget(to=["a@b"], connection="s", subject="x\ny")),
            "c.email.subject",
        ),
        (pb.Callback(email=alerts_pb2.EmailTarget(connection="s")), "c.email.to"),
    ],
)
def test_a_bad_notification_target_names_its_field(callback: pb.Callback, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_callback("c", callback)
    assert caught.value.field == field


class PageOps(Notifier):
    def notify(self, event: dict[str, object]) -> None:
        pass


def test_the_sdk_writes_deadline_alerts_and_notifiers_as_airflow_does() -> None:
    with DAG(
        "sla",
        deadline=DeadlineAlert(
            reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
            interval=timedelta(hours=1),
            callback=[
                Callback.webhook("https://hooks.example/x", signing_connection="hook_key"),
                Callback.email(["ops@example.org"], connection="smtp"),
                Callback.notifier(PageOps),
            ],
        ),
    ) as dag:
        shell("true", task_id="t")
    spec = dag.to_spec()
    assert spec.deadline.interval.ToTimedelta() == timedelta(hours=1)
    kinds = [c.WhichOneof("target") for c in spec.deadline.callbacks]
    assert kinds == ["webhook", "email", "python"]
    assert spec.deadline.callbacks[2].python.target.endswith(":PageOps.deliver")
    with pytest.raises(DagDefinitionError, match="interval must be positive"):
        DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=0)
