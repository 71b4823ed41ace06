"""A worker's results: checked, applied in batches, acknowledged once stored, successors handed off.

Acknowledged means stored: a ReportAck is sent once the result's transaction committed. A result
that cannot be written (the database restarting, say) is retried with backoff for as long as the
stream is open; when it closes, the worker still holds the result and sends it again on its next
stream. Every result is applied as the report of the stream's worker, never of an id a message
names, and the store applies it only if that worker holds the attempt.

Successor hand-offs (``schedd_store.handoffs``): a success whose attempt was claimed with a hand-off
keeps one of its worker's credits (the result carries one for the slot the attempt freed) while it
is applied; the successor claimed in the same statement is sent just before the ack (both were
stored by the same commit), and a credit kept for nothing goes back to the dispatcher. A successor
claimed by a statement that committed is never left claimed but unsent: when what follows the commit
fails (reading what its assignment is built from), its worker's stream is ended, and the worker
reconnects without it (``ResultReports._end_streams_owed``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

import grpc

from schedd.v1 import worker_pb2
from schedd_core.backoff import Backoff, retry
from schedd_core.claims import ClaimedAttempt
from schedd_core.errors import quote
from schedd_core.limits import MAX_ERROR_CHARS, MAX_RESULT_BYTES
from schedd_exec.assignments import Built
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.sessions import WorkerSession
from schedd_rpc import convert
from schedd_store import dispatch
from schedd_store.batching import Batcher
from schedd_store.database import Connection, Engine
from schedd_store.dispatch import AttemptResult, ReportStatus

log = logging.getLogger(__name__)

_ACK_CODE = {
    ReportStatus.APPLIED: grpc.StatusCode.OK,
    ReportStatus.DUPLICATE: grpc.StatusCode.OK,
    ReportStatus.STALE: grpc.StatusCode.FAILED_PRECONDITION,
    ReportStatus.NOT_HELD: grpc.StatusCode.PERMISSION_DENIED,
}

#: Longest pause between two tries of writing a result.
MAX_RETRY_DELAY = 2.0


class Applied(NamedTuple):
    """How a result was applied, and the successor handed off to its worker in the same
    transaction, if any."""

    status: ReportStatus
    handed: Built | None


class ResultReports:
    def __init__(self, engine: Engine, dispatcher: Dispatcher) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self.batcher: Batcher[AttemptResult, Applied] = Batcher("results", self._apply)
        #: Receives every result this registry applied (not repeated or stale ones): metrics.
        self.on_applied: Callable[[worker_pb2.TaskResult], None] | None = None

    async def _apply(self, batch: Sequence[AttemptResult]) -> list[Applied]:
        """Apply ``batch`` (``dispatch.apply_results``: one statement, or one transaction), claiming
        with it the successors handed off by the successes that kept a credit for them."""
        handed: dict[int, Built] = {}
        stored: dict[int, ClaimedAttempt] = {}

        async def hand_off(conn: Connection, claimed: dict[int, ClaimedAttempt], *, committed: bool) -> None:
            handed.clear()  # a transaction tried again starts afresh
            if committed:
                stored.update(claimed)
                self._dispatcher.faults.hit("registry.handed_off")  # a test fails the build here
            handed.update(await self._dispatcher.builder.hand_off(conn, claimed))

        try:
            statuses = await dispatch.apply_results(self._engine, batch, hand_off=hand_off)
        except Exception:
            self._end_streams_owed(stored)
            raise
        return [Applied(status, handed.get(r.ti_id)) for status, r in zip(statuses, batch, strict=True)]

    def _end_streams_owed(self, stored: dict[int, ClaimedAttempt]) -> None:
        """Successors were claimed by a statement that committed, but what followed it failed, so
        their assignments will not be sent: end their workers' streams. A worker reconnects without
        them, which has them counted lost (``dispatch.register_worker``), and the leader runs them
        again; nothing is left claimed for a worker that never heard of it."""
        for worker_id in sorted({c.worker_id for c in stored.values()}):
            session = self._dispatcher.session(worker_id)
            if session is not None:
                log.warning("ending worker %s's stream: a successor handed off to it was not sent", worker_id)
                session.end("a successor handed off to this worker could not be sent; reconnect")

    def report(self, result: worker_pb2.TaskResult, session: WorkerSession) -> Awaitable[None]:
        """Apply one result of ``session``'s worker and acknowledge it (see the module docstring).

        Whether a success keeps a credit for its hand-off is decided at once, in the step that
        granted the credit its result brought: a dispatcher round woken by that grant cannot spend
        the credit on other queued work first. The returned awaitable applies and acknowledges it."""
        return self._store_and_acknowledge(result, attempt_result(result, session), session)

    async def _store_and_acknowledge(
        self, result: worker_pb2.TaskResult, item: AttemptResult, session: WorkerSession
    ) -> None:
        try:
            applied = await retry(
                lambda: self.batcher.submit(item),
                Backoff(0.05, MAX_RETRY_DELAY),
                retry_on=lambda _exc: not session.closed,
                on_failure=lambda exc, _wait: log.warning(
                    "result of attempt %s not stored yet (%s); retrying", item.attempt_id, exc
                ),
            )
        except Exception:
            return  # the stream closed: the worker keeps the result and sends it again on its next one
        status = applied.status
        if status == ReportStatus.APPLIED and self.on_applied is not None:
            self.on_applied(result)
        code = _ACK_CODE[status]
        message = {
            ReportStatus.STALE: "attempt is no longer current; result discarded",
            ReportStatus.NOT_HELD: f"attempt {quote(item.attempt_id)} is not held by worker "
            f"{quote(session.worker_id)}; result discarded",
        }.get(status, "")
        ack = worker_pb2.RegistryMessage(
            ack=worker_pb2.ReportAck(attempt=result.attempt, code=code.value[0], message=message)
        )
        try:
            if item.hand_off:
                # The successor first: the worker waits for it; the ack only lets it forget the result.
                await self._dispatcher.hand_off_done(session, applied.handed)
        finally:
            session.send(ack)


def attempt_result(result: worker_pb2.TaskResult, session: WorkerSession) -> AttemptResult:
    """``result`` as the store applies it for ``session``'s worker: a result value that cannot be
    stored fails the attempt instead, with the reason; a success keeps a credit for its hand-off."""
    problem = result_problem(result.result_json)
    if problem:
        result.result_json = ""  # never stored: it would fail the whole batch of results
        if result.outcome == worker_pb2.TASK_OUTCOME_SUCCEEDED:
            result.outcome = worker_pb2.TASK_OUTCOME_FAILED
            result.error = problem
    succeeded = result.outcome == worker_pb2.TASK_OUTCOME_SUCCEEDED
    return AttemptResult(
        worker_id=session.worker_id,
        ti_id=result.attempt.task_instance_id,
        attempt_id=result.attempt.attempt_id,
        try_number=result.attempt.try_number,
        succeeded=succeeded,
        exit_code=result.exit_code,
        error=result.error[:MAX_ERROR_CHARS],
        ended_at=convert.from_ts(result.end_time),
        started_at=convert.from_ts(result.start_time) if result.HasField("start_time") else None,
        result_json=result.result_json,
        abandoned=result.outcome == worker_pb2.TASK_OUTCOME_ABANDONED,
        no_retry=result.no_retry,
        reschedule_at=convert.from_ts(result.reschedule_time)
        if result.outcome == worker_pb2.TASK_OUTCOME_RESCHEDULED and result.HasField("reschedule_time")
        else None,
        skipped=result.outcome == worker_pb2.TASK_OUTCOME_SKIPPED,
        hand_off=succeeded and session.keep_for_hand_off(result.attempt.attempt_id),
    )


def result_problem(result_json: str) -> str:
    """Why a task's result cannot be stored, or "" when it can (PostgreSQL's jsonb has no NaN, no
    infinity and no NUL character)."""
    if not result_json:
        return ""
    size = len(result_json.encode())
    if size > MAX_RESULT_BYTES:
        return f"the task returned {size} bytes of JSON; the limit is {MAX_RESULT_BYTES}"

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not a JSON value")

    try:
        json.loads(result_json, parse_constant=refuse)
    except ValueError as exc:
        return f"the task's result is not valid JSON: {exc}"
    if "\\u0000" in result_json:
        return "the task's result contains a NUL character, which cannot be stored"
    return ""
