"""The registry's part of a run's trace: a span for each task instance it hands to a worker.

For an assignment whose run is traced (it carries the run's ``traceparent``) and with tracing on
in the registry, the span ``task <dag>.<task>`` runs from when the task instance was queued to its
claim for a worker, a child of the run's context; the assignment then carries this span's
``traceparent``, so the worker's attempt span is its child. With tracing off the assignment
keeps the run's ``traceparent`` and nothing else is done.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.trace import SpanKind

from schedd.v1 import worker_pb2
from schedd_telemetry import tracing


class TaskSpans:
    def __init__(self, registry_id: str) -> None:
        self._tracer = tracing.tracer("schedd.registry")
        self._registry_id = registry_id

    def claimed(self, assignments: Sequence[worker_pb2.Assignment]) -> None:
        """Record a span for each traced assignment of a claim and point the assignment's
        ``traceparent`` at it. Call before the assignments are sent."""
        if not tracing.enabled():
            return
        for assignment in assignments:
            parent = tracing.parent(assignment.traceparent)
            if parent is None:
                continue
            queued = assignment.queued_time
            start = queued.seconds * 10**9 + queued.nanos if assignment.HasField("queued_time") else None
            span = self._tracer.start_span(
                f"task {assignment.dag_id}.{assignment.task_id}",
                context=parent,
                kind=SpanKind.PRODUCER,
                start_time=start,
                attributes={
                    "schedd.dag_id": assignment.dag_id,
                    "schedd.run_id": assignment.run_id,
                    "schedd.task_id": assignment.task_id,
                    "schedd.try_number": assignment.attempt.try_number,
                    "schedd.attempt_id": assignment.attempt.attempt_id,
                    "schedd.registry_id": self._registry_id,
                },
            )
            span.add_event("claimed")
            span.end()
            assignment.traceparent = tracing.traceparent(span)
