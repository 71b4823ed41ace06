"""How a worker reports an ended attempt: the ``TaskResult`` built from its ``Outcome``, and results
ready together sent as one message (``schedd_rpc.stream_batches``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from schedd.v1 import worker_pb2
from schedd_exec.outcome import Outcome
from schedd_rpc import convert

_OUTCOME = {True: worker_pb2.TASK_OUTCOME_SUCCEEDED, False: worker_pb2.TASK_OUTCOME_FAILED}


def task_result(assignment: worker_pb2.Assignment, outcome: Outcome, error: str) -> worker_pb2.TaskResult:
    """The result of ``assignment``'s attempt, which ended as ``outcome`` with ``error`` (masked and
    made reportable by the caller). An abandoned attempt is reported abandoned whatever else it says;
    otherwise a reschedule or a skip overrides success and failure."""
    result = worker_pb2.TaskResult(
        attempt=assignment.attempt,
        outcome=worker_pb2.TASK_OUTCOME_ABANDONED if outcome.abandoned else _OUTCOME[outcome.succeeded],
        exit_code=outcome.exit_code,
        error=error,
        start_time=convert.ts(outcome.started_at),
        end_time=convert.ts(outcome.ended_at),
        result_json=outcome.result_json,
        dag_id=assignment.dag_id,
        no_retry=outcome.no_retry,
    )
    if outcome.reschedule_at is not None and not outcome.abandoned:
        result.outcome = worker_pb2.TASK_OUTCOME_RESCHEDULED
        result.reschedule_time.FromDatetime(outcome.reschedule_at.astimezone(UTC))
    elif outcome.skipped and not outcome.abandoned:
        result.outcome = worker_pb2.TASK_OUTCOME_SKIPPED
    return result


def results_message(results: Sequence[worker_pb2.TaskResult]) -> worker_pb2.WorkerMessage:
    return worker_pb2.WorkerMessage(results=worker_pb2.TaskResults(results=results))


def reportable_text(value: str) -> str:
    """A task's output or error as text a registry accepts: NUL characters replaced."""
    return value.replace("\x00", "\ufffd")
