"""The registry's side of the store: workers, claims, heartbeats, results and logs.

Claims use ``FOR UPDATE SKIP LOCKED``, so any number of registries can claim
side by side and no attempt is handed out twice. Every report is conditional on
the attempt id it names and on the worker that reports it (the worker id of the
registry's session, never one the message names) holding that attempt, in the
SQL statement that applies it: a report of a superseded attempt changes nothing
and comes back as stale; one about another worker's attempt changes nothing and
comes back as not held; a repeated report of an applied result comes back as a
duplicate. A second stream for a worker id whose stream is live is refused
(:class:`WorkerConnected`) before anything is written. Attempts found lost
(abandoned by their worker, or missing from a reconnecting worker's list) are
only *marked* here; the leading scheduler fails them over, fenced, on the
``schedd_lost`` notification.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from schedd_core.claims import ClaimedAttempt
from schedd_core.errors import FailedPrecondition, quote
from schedd_core.limits import MAX_LOG_BYTES_PER_ATTEMPT
from schedd_core.states import TaskState, WorkerState
from schedd_store import channels, statements as sql
from schedd_store.database import Connection, Engine
from schedd_store.report_status import ReportStatus as ReportStatus, recorded_outcomes, report_status
from schedd_store.reports import AttemptResult as AttemptResult
from schedd_store.sensors import apply_sensor_outcomes, is_sensor_outcome


class Outcome(enum.Enum):
    SUCCEEDED = "success"
    FAILED = "failed"
    #: The worker stopped the attempt before it finished; it is lost and runs again.
    ABANDONED = "abandoned"


@dataclass(frozen=True)
class AttemptRef:
    ti_id: int
    attempt_id: str
    try_number: int


@dataclass(frozen=True)
class LogChunk:
    #: The worker whose stream sent the chunk: it is stored only if that worker holds the attempt.
    worker_id: str
    ti_id: int
    attempt_id: str
    offset: int
    data: str


class WorkerConnected(FailedPrecondition):
    """A worker id whose stream is live said hello again (with another incarnation)."""


async def claim(engine: Engine, *, worker_id: str, queues: Sequence[str], limit: int) -> list[ClaimedAttempt]:
    """Claim for one worker in a transaction of its own; see :func:`claim_in`."""
    if limit <= 0:
        return []
    async with engine.begin() as conn:
        return await claim_in(conn, slots=[worker_id] * limit, queues=queues)


async def claim_in(conn: Connection, *, slots: Sequence[str], queues: Sequence[str]) -> list[ClaimedAttempt]:
    """Claim queued task instances of ``queues`` for the workers in ``slots`` (a worker id per free
    slot, the most important first), moving them to running and recording their attempts. One
    statement serves any number of workers. The claim holds once the caller's transaction commits."""
    if not slots:
        return []
    rows = (
        await conn.execute(sql.CLAIM_TASK_INSTANCES, {"slots": list(slots), "queues": list(queues)})
    ).all()
    return [claimed_attempt(r) for r in rows]


def claimed_attempt(row: Any, prefix: str = "") -> ClaimedAttempt:
    """A row of a claim (``statements.claimed._claimed_columns``, columns named with ``prefix``) as
    the attempt it records."""
    r = row._mapping
    p = prefix
    return ClaimedAttempt(
        ti_id=r[f"{p}id"],
        task_id=r[f"{p}task_id"],
        try_number=r[f"{p}try_number"],
        attempt_id=str(r[f"{p}attempt_id"]),
        dag_id=r[f"{p}dag_id"],
        run_id=r[f"{p}run_id"],
        run_pk=r[f"{p}run_pk"],
        logical_date=r[f"{p}logical_date"],
        dag_version_id=r[f"{p}dag_version_id"],
        conf=r[f"{p}conf"] or {},
        run_has_results=r[f"{p}run_has_results"],
        worker_id=r[f"{p}worker_id"],
        run_type=r[f"{p}run_type"],
        data_interval_start=r[f"{p}data_interval_start"],
        data_interval_end=r[f"{p}data_interval_end"],
        queued_at=r[f"{p}queued_at"],
        trace_context=r[f"{p}trace_context"] or "",
        first_poke_at=r[f"{p}first_poke_at"],
        map_index=r[f"{p}map_index"],
        commit_secret=r[f"{p}commit_secret"],
        hands_off=r[f"{p}hands_off"],
    )


async def upstream_results(
    conn: Connection, run_pks: Sequence[int], task_ids: Sequence[str]
) -> dict[tuple[int, str], Any]:
    """Stored result values of the given tasks in the given runs, by (run pk, task id); the value of a
    mapped task is the list of its instances' results by map index (None for one that stored none)."""
    if not run_pks or not task_ids:
        return {}
    rows = (
        await conn.execute(
            sql.UPSTREAM_RESULTS, {"run_pks": list(set(run_pks)), "task_ids": list(set(task_ids))}
        )
    ).all()
    return {(r.run_pk, r.task_id): r.result for r in rows}


class HandOff(Protocol):
    """Called with the successors handed off by the results just applied (claimed for the worker of
    their source), by source task instance, on the connection that applied them: within their
    transaction (``committed`` false: what it does commits with them, or nothing does), or once the
    statement that applied them has committed (``committed`` true: it must not lose what was
    claimed). ``AssignmentClaims.hand_off`` reads what their assignments are built from."""

    async def __call__(
        self, conn: Connection, claimed: dict[int, ClaimedAttempt], *, committed: bool
    ) -> None: ...


async def apply_results(
    engine: Engine, results: Sequence[AttemptResult], *, hand_off: HandOff | None = None
) -> list[ReportStatus]:
    """Apply a batch of attempt results and wake the scheduler for their runs.

    Returns one status per result, in order; each is stored when this returns. Abandoned attempts
    are marked lost (the scheduler fails them over) and count as applied. The successes of results
    that ask for it (``AttemptResult.hand_off``) hand off their successors in the same statement when
    ``hand_off`` is given, which is then called with what was handed off.

    A batch of finished attempts alone (the common case) is applied by one statement in a
    transaction of its own (``statements.APPLY_RESULTS``, which writes everything a result entails),
    at one round trip; ``hand_off`` is called after it committed. A batch with sensor outcomes or
    abandoned attempts is applied in one explicit transaction, ``hand_off`` within it.
    """
    if not results:
        return []
    finished = [r for r in results if not r.abandoned and not is_sensor_outcome(r)]
    sensed = [r for r in results if not r.abandoned and is_sensor_outcome(r)]
    abandoned = [r for r in results if r.abandoned]
    one_statement = not sensed and not abandoned
    applied: dict[str, int] = {}
    lost: set[int] = set()
    async with engine.autocommit() if one_statement else engine.begin() as conn:
        if finished:
            rows = (await conn.execute(sql.APPLY_RESULTS, _finished_params(finished, hand_off))).all()
            applied = {str(r.attempt_id): r.run_pk for r in rows}
            handed = {r.id: claimed_attempt(r, "handed_") for r in rows if r.handed_id is not None}
            if handed and hand_off is not None:
                await hand_off(conn, handed, committed=one_statement)
        if sensed:
            applied |= await apply_sensor_outcomes(conn, sensed)
        if abandoned:
            lost = set(
                await _mark_lost(
                    conn,
                    [AttemptRef(r.ti_id, r.attempt_id, r.try_number) for r in abandoned],
                    [r.worker_id for r in abandoned],
                )
            )
        rest = [r for r in results if r.attempt_id not in applied and not (r.abandoned and r.ti_id in lost)]
        recorded = await recorded_outcomes(conn, rest)
    return [report_status(r, applied, lost, recorded) for r in results]


def _finished_params(finished: Sequence[AttemptResult], hand_off: HandOff | None) -> dict[str, Any]:
    """``statements.APPLY_RESULTS``'s parameters for results of finished attempts."""
    return {
        "ti_ids": [r.ti_id for r in finished],
        "attempt_ids": [r.attempt_id for r in finished],
        "try_numbers": [r.try_number for r in finished],
        "targets": [(TaskState.SUCCESS if r.succeeded else TaskState.FAILED).value for r in finished],
        "exit_codes": [r.exit_code for r in finished],
        "errors": [r.error for r in finished],
        "started": [r.started_at for r in finished],
        "ended": [r.ended_at for r in finished],
        "results": [r.result_json or None for r in finished],
        "no_retries": [r.no_retry and not r.succeeded for r in finished],
        "worker_ids": [r.worker_id for r in finished],
        "handing_off": [r.attempt_id for r in finished if r.hand_off and hand_off is not None],
    }


async def _mark_lost(
    conn: Connection, attempts: Sequence[AttemptRef], worker_ids: Sequence[str]
) -> list[int]:
    """Mark lost those of ``attempts`` that are running on the worker named beside each."""
    rows = (
        await conn.execute(
            sql.MARK_ATTEMPTS_LOST,
            {
                "ti_ids": [a.ti_id for a in attempts],
                "attempt_ids": [a.attempt_id for a in attempts],
                "try_numbers": [a.try_number for a in attempts],
                "worker_ids": list(worker_ids),
            },
        )
    ).all()
    if rows:
        await conn.execute(sql.NOTIFY, {"channel": channels.LOST, "payload": ""})
    return [r.id for r in rows]


async def record_worker_heartbeat(
    engine: Engine, worker_id: str, attempts: Sequence[AttemptRef], *, lost: Sequence[AttemptRef] = ()
) -> set[str]:
    """Record that the worker was heard now (running ``attempts``), and mark ``lost`` the attempts it
    received but does not run; returns the attempt ids among ``attempts`` that are no longer current
    on that worker, for it to stop. The heartbeat is stored when this returns."""
    async with engine.begin() as conn:
        if lost:
            await _mark_lost(conn, lost, [worker_id] * len(lost))
        rows = (
            await conn.execute(
                sql.RECORD_WORKER_HEARTBEAT,
                {
                    "worker_id": worker_id,
                    "ti_ids": [a.ti_id for a in attempts],
                    "attempt_ids": [a.attempt_id for a in attempts],
                    "try_numbers": [a.try_number for a in attempts],
                },
            )
        ).all()
    return {str(r.attempt_id) for r in rows}


async def append_logs(engine: Engine, chunks: Sequence[LogChunk]) -> None:
    """Store captured output; chunks of attempts their sender does not hold, and chunks past the
    per-attempt limit, are dropped."""
    if not chunks:
        return
    async with engine.begin() as conn:
        await conn.execute(
            sql.APPEND_LOGS,
            {
                "ti_ids": [c.ti_id for c in chunks],
                "attempt_ids": [c.attempt_id for c in chunks],
                "worker_ids": [c.worker_id for c in chunks],
                "offsets": [c.offset for c in chunks],
                "data": [c.data for c in chunks],
                "max_bytes": MAX_LOG_BYTES_PER_ATTEMPT,
            },
        )


async def register_worker(
    engine: Engine,
    *,
    worker_id: str,
    hostname: str,
    queues: Sequence[str],
    capacity: int,
    code_version: str,
    registry: str,
    incarnation: str,
    running: Sequence[AttemptRef],
    fence_window: float,
    silence_limit: float,
    replace_live: bool = False,
) -> bool:
    """Record a connecting worker, with the windows its registry granted it (how long it may run
    attempts unheard without and with an etcd lease), and mark every attempt assigned to it that it
    does not report running as lost. Returns whether a drain was requested for it.

    Raises :class:`WorkerConnected`, having changed nothing, while the worker id has a live stream
    of another incarnation (see ``UPSERT_WORKER``), unless ``replace_live`` (for a caller that is
    no stream: a scheduler's local executor)."""
    async with engine.begin() as conn:
        drain = (
            await conn.execute(
                sql.UPSERT_WORKER,
                {
                    "worker_id": worker_id,
                    "hostname": hostname,
                    "queues": list(queues),
                    "capacity": capacity,
                    "code_version": code_version,
                    "registry": registry,
                    "incarnation": incarnation,
                    "fence_window": fence_window,
                    "silence_limit": silence_limit,
                    "replace_live": replace_live,
                    "live_states": [WorkerState.ACTIVE.value, WorkerState.DRAINING.value],
                },
            )
        ).first()
        if drain is None:
            live = (await conn.execute(sql.LIVE_WORKER, {"worker_id": worker_id})).first()
            where = (
                f" on registry {quote(live.registry)}, heard {float(live.silent_for):.1f}s ago"
                if live
                else ""
            )
            raise WorkerConnected(
                f"worker {quote(worker_id)} is connected{where}; a second stream for it is refused "
                "until that one ends or falls silent"
            )
        rows = (
            await conn.execute(
                sql.MARK_UNREPORTED_ATTEMPTS_LOST,
                {"worker_id": worker_id, "running": [a.attempt_id for a in running]},
            )
        ).all()
        if rows:
            await conn.execute(sql.NOTIFY, {"channel": channels.LOST, "payload": ""})
    return bool(drain.drain_requested)


async def mark_worker_draining(engine: Engine, worker_id: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(sql.MARK_WORKER_DRAINING, {"worker_id": worker_id})


async def drain_requested(engine: Engine, worker_id: str) -> bool:
    async with engine.connect() as conn:
        return bool((await conn.execute(sql.DRAIN_REQUESTED, {"worker_id": worker_id})).scalar())


async def mark_worker_gone(engine: Engine, *, worker_id: str, registry: str, incarnation: str) -> None:
    """The stream of this incarnation on this registry ended (a newer stream keeps the row)."""
    async with engine.begin() as conn:
        await conn.execute(
            sql.MARK_WORKER_GONE, {"worker_id": worker_id, "registry": registry, "incarnation": incarnation}
        )
