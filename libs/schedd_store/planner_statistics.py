"""The planner's statistics of ``task_instances`` kept in step with sudden growth.

PostgreSQL plans a statement with the statistics of the table's last ANALYZE, and a prepared
statement keeps its generic plan until those statistics change. A table that grew from a few
hundred rows to a hundred thousand in seconds (a large run planned, a burst of runs) is still
taken for tiny until autovacuum analyzes it, up to its naptime (a minute by default) later: the
registries' result and claim statements then read the whole table by sequential scans, about
20 ms a result instead of one (docs/performance.md, "Isolation under bursts").

The leader counts the task instances its passes create (:meth:`StatisticsKeeper.created`); once
they reach the number the last statistics counted (and at least ``min_growth``), it analyzes the
table on a connection of its own, beside its passes: ANALYZE changes only statistics, and its lock
makes no read or write wait. Growth by doubling costs a logarithmic number of ANALYZEs; a table
that grows slowly is left to autovacuum.

Guaranteed: after the leader's passes created at least ``max(min_growth, rows counted before)``
task instances, an ANALYZE of ``task_instances`` starts (tested by
``tests/integration/test_planner_statistics.py``). Not guaranteed: statistics of other tables, of
rows that others write (runs, attempts), or of deletions; a role that does not own the table gets
a warning from PostgreSQL and no new statistics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from schedd_store.database import Engine
from schedd_store.named_sql import Statement

log = logging.getLogger(__name__)

#: Fewest created task instances worth an ANALYZE of their own.
MIN_GROWTH = 1000

_ANALYZE = Statement("ANALYZE task_instances")
#: The rows the table's statistics count (-1 before its first ANALYZE or VACUUM).
_COUNTED = Statement(
    "SELECT greatest(reltuples, 0)::bigint AS n FROM pg_class WHERE oid = 'task_instances'::regclass"
)


class StatisticsKeeper:
    """Analyzes ``task_instances`` when the leader's passes have doubled it (see the module)."""

    def __init__(self, engine: Engine, *, min_growth: int = MIN_GROWTH) -> None:
        self._engine = engine
        self._min_growth = min_growth
        #: Rows the table's statistics counted, as of their last read.
        self._counted = 0
        #: Task instances created since then.
        self._created = 0
        self._due = asyncio.Event()
        #: ANALYZEs this keeper ran.
        self.analyzed = 0

    def created(self, rows: int) -> None:
        """A pass of the leader created ``rows`` task instances (it committed)."""
        self._created += rows
        if self.due:
            self._due.set()

    @property
    def due(self) -> bool:
        """Whether enough task instances were created since the last statistics to analyze again."""
        return self._created >= max(self._min_growth, self._counted)

    async def run(self) -> None:
        """Analyze whenever due, until cancelled. Statistics are an optimisation: an ANALYZE that
        fails is logged and tried again at the next growth, never the end of the leader's term."""
        with contextlib.suppress(Exception):  # read again after the first ANALYZE
            self._counted = await self._read_counted()
        while True:
            await self._due.wait()
            self._due.clear()
            self._created = 0  # what is created while it runs counts toward the next
            try:
                async with self._engine.autocommit() as conn:
                    await conn.execute(_ANALYZE)
                self.analyzed += 1
                self._counted = await self._read_counted()
            except Exception as exc:
                log.warning("analyzing task_instances failed (%s); again at its next growth", exc)

    async def _read_counted(self) -> int:
        async with self._engine.autocommit() as conn:
            return int((await conn.execute(_COUNTED)).one().n)
