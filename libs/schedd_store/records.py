"""Plain records read from the store. The rpc layer translates them to protobuf messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd.v1 import resources_pb2 as pb
from schedd_core.mapping import instance_key


@dataclass(frozen=True)
class DagRecord:
    dag_id: str
    paused: bool
    created_at: datetime
    updated_at: datetime
    version_hash: str
    version_created_at: datetime
    spec: pb.DagSpec


@dataclass(frozen=True)
class TaskInstanceRecord:
    task_id: str
    #: Which instance of a mapped task this is (0, 1, ...); -1 for a task that is not mapped and for
    #: a mapped task's placeholder before it is expanded.
    map_index: int
    state: str
    try_number: int
    max_tries: int
    attempt_id: str | None
    worker_id: str | None
    queued_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    exit_code: int | None
    error: str | None
    priority_weight: int
    pool: str
    queue: str
    #: Hash of the DAG version the current (or last) attempt ran; None before any attempt.
    version_hash: str | None = None

    @property
    def key(self) -> str:
        """``task_id``, or ``task_id[map_index]`` for an instance of a mapped task."""
        return instance_key(self.task_id, self.map_index)


@dataclass(frozen=True)
class RunRecord:
    pk: int
    dag_id: str
    run_id: str
    run_type: str
    state: str
    logical_date: datetime
    conf: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    version_hash: str
    task_instances: list[TaskInstanceRecord] = field(default_factory=list)
    #: Why the scheduler failed the run, when it could not plan it.
    error: str | None = None
    #: The data interval of a scheduled or backfill run.
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    backfill_id: int | None = None
    #: The run ended because it was cancelled (its state is failed).
    cancelled: bool = False
    #: In a summary read (``runs.get_run_summary``), instead of ``task_instances``: how many task
    #: instances are in each state (a state with none left out).
    task_state_counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class BackfillProgress:
    total: int
    pending: int
    running: int
    succeeded: int
    failed: int
    skipped: int


@dataclass(frozen=True)
class BackfillRecord:
    id: int
    dag_id: str
    start_date: datetime
    end_date: datetime
    strategy: str
    max_active_runs: int
    chunk_size: int
    backward: bool
    reprocess: str
    state: str
    error: str | None
    created_at: datetime
    updated_at: datetime
    progress: BackfillProgress
    #: For a dry run only: the intervals (start, end, logical date), in the order their runs would be made.
    intervals: list[tuple[datetime, datetime, datetime]] = field(default_factory=list)
    #: The conf of the runs it creates (None: none).
    conf: dict[str, Any] | None = None
    #: Runs it reruns move to the DAG's current version first.
    run_on_latest_version: bool = False


def parse_spec(data: bytes) -> pb.DagSpec:
    spec = pb.DagSpec()
    spec.ParseFromString(data)
    return spec
