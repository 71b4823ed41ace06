"""Small builders shared by the integration tests."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd.v1 import resources_pb2 as pb
from schedd_scheduler.loop import SchedulingLoop
from schedd_scheduler.pending import PendingRuns
from schedd_store import dags, runs
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


async def registered_run(engine: AsyncEngine, dag: pb.DagSpec, run_id: str = "r1") -> RunRecord:
    await dags.register_dag(engine, dag)
    return await runs.create_run(
        engine,
        dag_id=dag.dag_id,
        run_id=run_id,
        run_type="manual",
        logical_date=datetime.now(UTC),
        conf={},
    )


async def leading_loop(engine: AsyncEngine, token: int = 1) -> SchedulingLoop:
    """A scheduling loop of a term with ``token``, the fence raised for it."""
    await raise_fence(engine, token, f"test-{token}")
    return SchedulingLoop(engine, Fence(engine, token), PendingRuns(), VersionCache(), batch_size=500)
