"""One trace from the api call that creates a run through the scheduler's pass that queues its
task, the registry's claim and the worker's attempt, exported over OTLP/gRPC by each service
process to a receiver in the test; the task sees the attempt's span as ``TRACEPARENT``; and every
service logs JSON lines with ``SCHEDD_LOG_FORMAT=json``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd_devstack.services import Cluster
from tests.fixtures.otlp_receiver import ReceivedSpan, TraceReceiver
from tests.fixtures.services import schedctl

pytestmark = pytest.mark.e2e

DAG = "traced"
DEADLINE = 60.0


@pytest.fixture
def receiver() -> Iterator[TraceReceiver]:
    with TraceReceiver() as running:
        yield running


@pytest.fixture
def traced_cluster(
    fresh_database_url: str,
    etcd_endpoints: str,
    receiver: TraceReceiver,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    cluster = Cluster(
        fresh_database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("traced"),
        workers=1,
        service_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "SCHEDD_LOG_FORMAT": "json",
        },
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _one(spans: list[ReceivedSpan], service: str, name: str) -> ReceivedSpan | None:
    found = [s for s in spans if s.service == service and s.name == name]
    assert len(found) <= 1, found
    return found[0] if found else None


def test_one_trace_from_the_api_to_the_task(
    traced_cluster: Cluster, receiver: TraceReceiver, tmp_path: Path
) -> None:
    recorded = tmp_path / "traceparent"
    spec = {
        "dag_id": DAG,
        "tasks": [{"task_id": "t", "shell": {"command": f'printf %s "$TRACEPARENT" > {recorded}'}}],
    }
    (tmp_path / "dag.json").write_text(json.dumps(spec))
    api = traced_cluster.api_address
    assert schedctl(api, "dags", "register", str(tmp_path / "dag.json")).returncode == 0
    waited = schedctl(api, "runs", "trigger", DAG, "--run-id", "r1", "--wait")
    assert waited.returncode == 0, waited.stderr

    wanted = {
        "create": ("schedd-api", "schedd.v1.RunService/CreateRun"),
        "schedule": ("schedd-scheduler", f"schedule {DAG}"),
        "task": ("schedd-registry", f"task {DAG}.t"),
        "attempt": ("schedd-worker", f"attempt {DAG}.t"),
    }
    deadline = time.monotonic() + DEADLINE
    while True:
        spans = receiver.spans()
        found = {key: _one(spans, *where) for key, where in wanted.items()}
        if all(found.values()):
            break
        assert time.monotonic() < deadline, f"missing spans: {[k for k, v in found.items() if v is None]}"
        time.sleep(0.2)
    create, schedule, task, attempt = (found[k] for k in ("create", "schedule", "task", "attempt"))
    assert create is not None and schedule is not None and task is not None and attempt is not None

    assert len({create.trace_id, schedule.trace_id, task.trace_id, attempt.trace_id}) == 1
    assert schedule.parent_span_id == create.span_id
    assert task.parent_span_id == create.span_id
    assert attempt.parent_span_id == task.span_id
    assert attempt.attributes["schedd.run_id"] == "r1"
    assert attempt.attributes["schedd.try_number"] == 1
    assert schedule.attributes["schedd.task_ids"] is not None

    for log in traced_cluster.log_dir.glob("*.log"):  # SCHEDD_LOG_FORMAT=json: every line is an object
        lines = [line for line in log.read_text().splitlines() if line and not line.startswith("--- ")]
        assert lines and all(json.loads(line)["level"] for line in lines), log.name

    version, trace_id, span_id, flags = recorded.read_text().split("-")
    assert (version, trace_id, span_id) == ("00", attempt.trace_id, attempt.span_id)
    assert int(flags, 16) & 1, "sampled"
