"""The ``dag`` label of the registry's task metrics stays at 100 distinct values however many DAGs
report results; later DAGs count under ``_other``, and nothing is lost from the totals. The children
a hot path keeps (``LabelledChildren``) count as the metric's own."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import CollectorRegistry, Counter

from schedd.v1 import worker_pb2
from schedd_registry.metrics import DAG_LABELS, RegistryMetrics
from schedd_telemetry.labels import OTHER, BoundedLabel, LabelledChildren


def test_a_bounded_label_passes_the_first_values_and_folds_the_rest() -> None:
    label = BoundedLabel(3)
    assert [label(v) for v in ["a", "b", "a", "c", "d", "e", "b"]] == ["a", "b", "a", "c", OTHER, OTHER, "b"]


def _result(dag_id: str, outcome: worker_pb2.TaskOutcome.ValueType) -> worker_pb2.TaskResult:
    return worker_pb2.TaskResult(
        dag_id=dag_id,
        outcome=outcome,
        start_time=Timestamp(seconds=100),
        end_time=Timestamp(seconds=102, nanos=500_000_000),
    )


def _samples(metrics: RegistryMetrics, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (s.labels, s.value) for family in metrics.registry.collect() for s in family.samples if s.name == name
    ]


def test_the_dag_label_stops_at_100_distinct_values() -> None:
    metrics = RegistryMetrics()
    dags = [f"dag_{i:03d}" for i in range(250)]
    for dag in dags:
        metrics.applied(_result(dag, worker_pb2.TASK_OUTCOME_SUCCEEDED))
    metrics.applied(_result(dags[0], worker_pb2.TASK_OUTCOME_FAILED))
    metrics.applied(_result(dags[-1], worker_pb2.TASK_OUTCOME_ABANDONED))

    outcomes = _samples(metrics, "schedd_task_outcomes_total")
    labels = {s["dag"] for s, _ in outcomes}
    assert len(labels) == DAG_LABELS + 1 == 101
    assert labels == {*dags[:DAG_LABELS], OTHER}
    by_key = {(s["dag"], s["state"]): v for s, v in outcomes}
    assert by_key[(OTHER, "success")] == 150
    assert by_key[(dags[0], "failed")] == 1
    assert by_key[(OTHER, "abandoned")] == 1
    assert sum(v for _, v in outcomes) == 252

    durations = _samples(metrics, "schedd_task_duration_seconds_count")
    assert {s["dag"] for s, _ in durations} == labels
    assert sum(v for _, v in durations) == 251, "abandoned attempts have no duration"
    sums = {s["dag"]: v for s, v in _samples(metrics, "schedd_task_duration_seconds_sum")}
    assert sums[dags[1]] == 2.5


def test_labelled_children_count_as_the_metric_s_own_children_do() -> None:
    registry = CollectorRegistry()
    counter = Counter("things", "Things.", ["kind", "state"], registry=registry)
    children = LabelledChildren(counter)
    assert children("a", "ok") is children("a", "ok") is counter.labels(kind="a", state="ok")
    for _ in range(3):
        children("a", "ok").inc()
    children("b", "bad").inc()
    counter.labels(kind="a", state="ok").inc()
    assert registry.get_sample_value("things_total", {"kind": "a", "state": "ok"}) == 4
    assert registry.get_sample_value("things_total", {"kind": "b", "state": "bad"}) == 1
