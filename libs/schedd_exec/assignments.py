"""Turning claimed attempts into the assignment messages a worker runs.

The claim itself is the store's (``schedd_store.claims``), given to :class:`AssignmentBuilder` by
its owner; this module only builds messages from what was claimed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from schedd.v1 import resources_pb2 as pb, worker_pb2
from schedd_core.claims import ClaimedAttempt, ClaimedWork
from schedd_core.mapping import instance_key
from schedd_core.task_context import CONF_ENV
from schedd_rpc import convert


class Claims(Protocol):
    """Where assignments come from: ``schedd_store.claims.AssignmentClaims``, or a stand-in."""

    async def claim(self, *, slots: Sequence[str], queues: Sequence[str]) -> list[ClaimedWork]: ...

    async def hand_off(self, conn: Any, claimed: Mapping[int, ClaimedAttempt]) -> dict[int, ClaimedWork]: ...


class Built(NamedTuple):
    """An assignment for the worker ``worker_id`` (its ``hands_off``: its task instance has a
    successor hand-off, and its worker's registry keeps the slot it frees for the successor)."""

    worker_id: str
    assignment: worker_pb2.Assignment


class AssignmentBuilder:
    def __init__(self, claims: Claims) -> None:
        self._claims = claims

    async def claim(self, *, slots: Sequence[str], queues: Sequence[str]) -> list[Built]:
        """Claim queued task instances for the workers in ``slots`` (a worker id per free slot) and
        build their assignments; the claim, the specs and the upstream results are read in one
        transaction (see ``claims``)."""
        if not slots:
            return []
        return [_built(w) for w in await self._claims.claim(slots=slots, queues=queues)]

    async def hand_off(self, conn: Any, claimed: Mapping[int, ClaimedAttempt]) -> dict[int, Built]:
        """Inside the transaction ``conn`` that applied some successes and handed off their
        successors, ``claimed`` by source: their assignments."""
        return {source: _built(w) for source, w in (await self._claims.hand_off(conn, claimed)).items()}


def _built(work: ClaimedWork) -> Built:
    return Built(work.attempt.worker_id, assignment_of(work))


def assignment_of(work: ClaimedWork) -> worker_pb2.Assignment:
    """The assignment a worker runs for a claimed attempt."""
    c, task, dag = work.attempt, work.task, work.dag
    key = idempotency_key(c)
    interval = (
        (c.data_interval_start, c.data_interval_end)
        if c.data_interval_start is not None and c.data_interval_end is not None
        else None
    )
    env = attempt_env(
        task,
        dag_id=c.dag_id,
        run_id=c.run_id,
        run_type=c.run_type,
        try_number=c.try_number,
        attempt_id=c.attempt_id,
        logical_date=c.logical_date,
        data_interval=interval,
        idempotency_key=key,
        conf=c.conf,
    )
    params = merged_params(dag, task, c.conf)
    assignment = worker_pb2.Assignment(
        attempt=worker_pb2.AttemptRef(
            task_instance_id=c.ti_id, try_number=c.try_number, attempt_id=c.attempt_id
        ),
        dag_id=c.dag_id,
        run_id=c.run_id,
        task_id=c.task_id,
        logical_date=convert.ts(c.logical_date),
        env=env,
        idempotency_key=key,
        params=convert.struct(params),
        upstream_results_json=json.dumps(work.upstream) if work.upstream else "",
        traceparent=c.trace_context,
        queued_time=convert.ts(c.queued_at),
        hands_off=c.hands_off,
    )
    if interval is not None:
        assignment.data_interval_start.FromDatetime(interval[0])
        assignment.data_interval_end.FromDatetime(interval[1])
    if task.HasField("shell"):
        assignment.shell.CopyFrom(task.shell)
    elif task.HasField("python"):
        assignment.python.CopyFrom(task.python)
    assignment.transactional = task.transactional
    if task.transactional:
        assignment.commit_secret = c.commit_secret
    assignment.code_bundle = dag.code_bundle  # the run's pinned version imports from this bundle only
    if task.HasField("execution_timeout"):
        assignment.execution_timeout.CopyFrom(task.execution_timeout)
    if c.map_index >= 0:
        assignment.map_index = c.map_index
        assignment.mapping.CopyFrom(task.mapping)
    if task.HasField("sensor"):
        assignment.sensor.CopyFrom(task.sensor)
        if c.first_poke_at is not None:
            assignment.first_poke_time.FromDatetime(c.first_poke_at)
    return assignment


def attempt_env(
    task: pb.TaskSpec,
    *,
    dag_id: str,
    run_id: str,
    run_type: str,
    try_number: int,
    attempt_id: str,
    logical_date: datetime,
    data_interval: tuple[datetime, datetime] | None,
    idempotency_key: str,
    conf: Mapping[str, Any],
) -> dict[str, str]:
    """The environment an attempt's assignment carries: the task's ``env``, then the ``SCHEDD_*``
    variables of its identity (``SCHEDD_DATA_INTERVAL_START``/``_END`` only for a run with a data
    interval) and, for a Python task of a run with a conf, ``SCHEDD_RUN_CONF`` (its JSON: the task
    context's ``dag_run.conf``, ``schedd_core.task_context``; a shell task has its params in
    ``SCHEDD_PARAMS``). Times are ISO 8601 as given (the store's are UTC)."""
    env = dict(task.env)
    env.update(
        {
            "SCHEDD_DAG_ID": dag_id,
            "SCHEDD_RUN_ID": run_id,
            "SCHEDD_RUN_TYPE": run_type,
            "SCHEDD_TASK_ID": task.task_id,
            "SCHEDD_TRY_NUMBER": str(try_number),
            "SCHEDD_ATTEMPT_ID": attempt_id,
            "SCHEDD_LOGICAL_DATE": logical_date.isoformat(),
            "SCHEDD_IDEMPOTENCY_KEY": idempotency_key,
        }
    )
    if data_interval is not None:
        env["SCHEDD_DATA_INTERVAL_START"] = data_interval[0].isoformat()
        env["SCHEDD_DATA_INTERVAL_END"] = data_interval[1].isoformat()
    if conf and task.HasField("python"):
        env[CONF_ENV] = json.dumps(conf, separators=(",", ":"))
    return env


def merged_params(dag: pb.DagSpec, task: pb.TaskSpec, conf: dict[str, Any]) -> dict[str, Any]:
    """A task's params: the DAG's params, then the task's on top, then the run's conf on top (key by
    key). Integral numbers stay integers (see ``schedd_rpc.convert.from_struct``)."""
    params: dict[str, Any] = convert.from_struct(dag.params) if dag.HasField("params") else {}
    if task.HasField("params"):
        params.update(convert.from_struct(task.params))
    params.update(conf)
    return params


def idempotency_key(c: ClaimedAttempt) -> str:
    """``{dag}/{run}/{task}`` (``{dag}/{run}/{task}[{map_index}]`` for a mapped task's instance): the
    same for every attempt of one task instance in one run.

    A retry, or a re-run after an attempt was lost with its worker (even one that finished its
    work but could not report it), sees the key the earlier attempts saw, so a task can tell
    that its side effects were already applied. ``SCHEDD_ATTEMPT_ID`` and ``SCHEDD_TRY_NUMBER``
    tell the attempts apart.
    """
    return f"{c.dag_id}/{c.run_id}/{instance_key(c.task_id, c.map_index)}"
