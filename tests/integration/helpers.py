"""Small builders shared by the integration tests."""

from __future__ import annotations

from datetime import UTC, datetime

from schedd.v1 import resources_pb2 as pb
from schedd_scheduler.loop import SchedulingLoop
from schedd_scheduler.pending import PendingRuns
from schedd_store import dags, dispatch, runs
from schedd_store.database import Engine
from schedd_store.dispatch import AttemptResult
from schedd_store.fence import Fence, raise_fence
from schedd_store.records import RunRecord
from schedd_store.versions import VersionCache


def spec(dag_id: str, edges: dict[str, list[str]]) -> pb.DagSpec:
    """A spec of no-op shell tasks; ``edges`` maps each task id to its upstream ids."""
    return pb.DagSpec(
        dag_id=dag_id,
        tasks=[
            pb.TaskSpec(task_id=tid, upstream=ups, shell=pb.ShellCommand(command="true"))
            for tid, ups in edges.items()
        ],
    )


async def registered_run(engine: Engine, dag: pb.DagSpec, run_id: str = "r1") -> RunRecord:
    await dags.register_dag(engine, dag)
    return await runs.create_run(
        engine,
        dag_id=dag.dag_id,
        run_id=run_id,
        run_type="manual",
        logical_date=datetime.now(UTC),
        conf={},
    )


async def leading_loop(engine: Engine, token: int = 1) -> SchedulingLoop:
    """A scheduling loop of a term with ``token``, the fence raised for it."""
    await raise_fence(engine, token, f"test-{token}")
    return SchedulingLoop(engine, Fence(engine, token), PendingRuns(), VersionCache(), batch_size=500)


async def finish_all_running(engine: Engine, *, succeed: bool = True, result_json: str = "") -> list[str]:
    """Claim every queued task instance of the default queue for worker ``w`` and report each
    attempt ended (succeeded, or failed with exit code 1; returning ``result_json``); the task ids
    claimed, sorted."""
    claimed = await dispatch.claim(engine, worker_id="w", queues=["default"], limit=100)
    statuses = await dispatch.apply_results(
        engine,
        [
            AttemptResult(
                worker_id="w",
                ti_id=c.ti_id,
                attempt_id=c.attempt_id,
                try_number=c.try_number,
                succeeded=succeed,
                exit_code=0 if succeed else 1,
                error="",
                ended_at=datetime.now(UTC),
                result_json=result_json,
            )
            for c in claimed
        ],
    )
    assert all(s is dispatch.ReportStatus.APPLIED for s in statuses)
    return sorted(c.task_id for c in claimed)
