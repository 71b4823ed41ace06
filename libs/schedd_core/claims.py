"""What a claim hands out: an attempt as the store recorded it, and what its assignment is built from.

Plain records, filled by the store (``schedd_store.claims``) and read by whoever builds the
assignments (``schedd_exec.assignments``), so that neither side imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd.v1 import resources_pb2 as pb


@dataclass(frozen=True)
class ClaimedAttempt:
    ti_id: int
    task_id: str
    try_number: int
    attempt_id: str
    dag_id: str
    run_id: str
    run_pk: int
    logical_date: datetime
    dag_version_id: int
    conf: dict[str, Any]
    #: Whether any task of the run stored a result (there may be upstream results to hand out).
    run_has_results: bool = False
    #: The worker the attempt was claimed for.
    worker_id: str = ""
    run_type: str = "manual"
    #: The data interval of a scheduled or backfill run.
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    #: When the task instance was queued (None for rows queued before that was recorded).
    queued_at: datetime | None = None
    #: The run's ``traceparent`` ("" for an untraced run).
    trace_context: str = ""
    #: A reschedule-mode sensor: when the first poke of its current try started (None for the first).
    first_poke_at: datetime | None = None
    #: Which instance of a mapped task this is; -1 for a task that is not mapped.
    map_index: int = -1
    #: The attempt's commit secret (only its SHA-256 is stored): a transactional task proves with it
    #: that it commits its own attempt. Handed to that attempt's process alone, never logged.
    commit_secret: str = field(default="", repr=False)
    #: The task instance has a successor hand-off (``schedd_core.handoffs``): its worker's registry
    #: keeps the slot it frees for the successor while it applies the success.
    hands_off: bool = False


@dataclass(frozen=True)
class ClaimedWork:
    """A claimed attempt with the spec of its run's pinned DAG version, its task's spec and the
    stored results of its upstream tasks that have any (by task id; a mapped upstream task's is the
    list of its instances' results)."""

    attempt: ClaimedAttempt
    dag: pb.DagSpec
    task: pb.TaskSpec
    upstream: dict[str, Any]
