"""The worker's part of a run's trace: a span for each attempt it runs, and ``TRACEPARENT`` in
the task's environment.

An assignment carries the ``traceparent`` of its task's span (made by the registry that claimed
it) when its run is traced. With tracing on in the worker, the attempt gets a span ``attempt
<dag>.<task>``, a child of that one, from when the worker starts it to when it reports how it
ended (an error status unless it succeeded); the task sees the attempt span as its
``TRACEPARENT``, and the worker's log lines about the attempt carry its trace id. With tracing off
the task sees the assignment's ``traceparent`` unchanged. An untraced run's tasks get no
``TRACEPARENT`` (one in the worker's own environment is not on the task environment's allow-list,
``schedd_exec.environment``, and so does not pass).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from schedd.v1 import worker_pb2
from schedd_exec.outcome import Outcome
from schedd_telemetry import tracing
from schedd_telemetry.logs import bound

ENV_NAME = "TRACEPARENT"


class AttemptSpans:
    def __init__(self) -> None:
        self._tracer = tracing.tracer("schedd.worker")
        self._spans: dict[str, trace.Span] = {}

    @contextlib.contextmanager
    def starting(self, assignment: worker_pb2.Assignment) -> Iterator[None]:
        """Around handing ``assignment`` to the executor: what the executor starts inside (the
        attempt's asyncio task) runs with the attempt's span and log fields current."""
        span = None
        if assignment.traceparent:
            parent = tracing.parent(assignment.traceparent) if tracing.enabled() else None
            if parent is None:
                assignment.env[ENV_NAME] = assignment.traceparent
            else:
                span = self._tracer.start_span(
                    f"attempt {assignment.dag_id}.{assignment.task_id}",
                    context=parent,
                    kind=SpanKind.CONSUMER,
                    attributes={
                        "schedd.dag_id": assignment.dag_id,
                        "schedd.run_id": assignment.run_id,
                        "schedd.task_id": assignment.task_id,
                        "schedd.try_number": assignment.attempt.try_number,
                        "schedd.attempt_id": assignment.attempt.attempt_id,
                    },
                )
                self._spans[assignment.attempt.attempt_id] = span
                assignment.env[ENV_NAME] = tracing.traceparent(span)
        with (
            bound(
                dag_id=assignment.dag_id,
                run_id=assignment.run_id,
                task_id=assignment.task_id,
                try_number=assignment.attempt.try_number,
                attempt_id=assignment.attempt.attempt_id,
            ),
            trace.use_span(span, end_on_exit=False) if span is not None else contextlib.nullcontext(),
        ):
            yield

    def ended(self, assignment: worker_pb2.Assignment, outcome: Outcome) -> None:
        span = self._spans.pop(assignment.attempt.attempt_id, None)
        if span is None:
            return
        span.set_attribute("schedd.exit_code", outcome.exit_code)
        if outcome.abandoned:
            span.set_attribute("schedd.abandoned", True)
        if not outcome.succeeded:
            span.set_status(Status(StatusCode.ERROR, outcome.error[:200] or "failed"))
        span.end()
