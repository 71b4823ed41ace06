"""A cache of DAG versions. Versions are immutable once written, so entries never go stale.

A stored spec that cannot be read (damaged bytes) does not stop the cache: it is remembered as
broken, and only asking for *that* version raises :class:`UnreadableVersion`, so the one run
pinned to it can be isolated while every other run goes on.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import DecodeError

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import ScheddError
from schedd_core.graph import DagGraph
from schedd_store import statements as sql
from schedd_store.database import Connection
from schedd_store.fence import FencedConnection
from schedd_store.records import parse_spec


class UnreadableVersion(ScheddError):
    """The stored spec of a DAG version cannot be read."""


class VersionCache:
    def __init__(self) -> None:
        self._specs: dict[int, pb.DagSpec] = {}
        self._graphs: dict[int, DagGraph] = {}
        self._tasks: dict[int, dict[str, pb.TaskSpec]] = {}
        self._broken: dict[int, str] = {}

    async def load(self, conn: Connection | FencedConnection, version_ids: Iterable[int]) -> None:
        """Make sure every version in ``version_ids`` is cached (or known to be unreadable)."""
        missing = [v for v in set(version_ids) if v not in self._specs and v not in self._broken]
        if missing:
            for row in (await conn.execute(sql.GET_VERSION_SPECS, {"ids": missing})).all():
                try:
                    spec = parse_spec(row.spec)
                    graph = DagGraph.from_spec(spec)
                except (DecodeError, ValueError, KeyError) as exc:
                    self._broken[row.id] = f"the stored spec of DAG version {row.id} cannot be read: {exc}"
                    continue
                self._specs[row.id] = spec
                self._tasks[row.id] = {t.task_id: t for t in spec.tasks}
                self._graphs[row.id] = graph

    def _check(self, version_id: int) -> None:
        if version_id in self._broken:
            raise UnreadableVersion(self._broken[version_id])

    def spec(self, version_id: int) -> pb.DagSpec:
        self._check(version_id)
        return self._specs[version_id]

    def task(self, version_id: int, task_id: str) -> pb.TaskSpec:
        self._check(version_id)
        return self._tasks[version_id][task_id]

    def graph(self, version_id: int) -> DagGraph:
        self._check(version_id)
        return self._graphs[version_id]
