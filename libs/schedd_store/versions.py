"""A cache of DAG versions. Versions are immutable once written, so entries never go stale."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncConnection

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_store import statements as sql
from schedd_store.fence import FencedConnection
from schedd_store.records import parse_spec


class VersionCache:
    def __init__(self) -> None:
        self._specs: dict[int, pb.DagSpec] = {}
        self._graphs: dict[int, DagGraph] = {}
        self._tasks: dict[int, dict[str, pb.TaskSpec]] = {}

    async def load(self, conn: AsyncConnection | FencedConnection, version_ids: Iterable[int]) -> None:
        """Make sure every version in ``version_ids`` is cached."""
        missing = [v for v in set(version_ids) if v not in self._specs]
        if missing:
            for row in (await conn.execute(sql.GET_VERSION_SPECS, {"ids": missing})).all():
                spec = parse_spec(row.spec)
                self._specs[row.id] = spec
                self._tasks[row.id] = {t.task_id: t for t in spec.tasks}

    def spec(self, version_id: int) -> pb.DagSpec:
        return self._specs[version_id]

    def task(self, version_id: int, task_id: str) -> pb.TaskSpec:
        return self._tasks[version_id][task_id]

    def graph(self, version_id: int) -> DagGraph:
        graph = self._graphs.get(version_id)
        if graph is None:
            graph = self._graphs[version_id] = DagGraph.from_spec(self._specs[version_id])
        return graph
