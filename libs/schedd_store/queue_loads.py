"""What each queue holds: task instances queued and attempts running, for metrics and
autoscalers (a read of the ``state`` index; no row locks)."""

from __future__ import annotations

from dataclasses import dataclass

from schedd_store.database import Engine
from schedd_store.statements.guards import _sql

QUEUE_LOADS = _sql(
    "SELECT queue, count(*) FILTER (WHERE state = 'queued') AS queued, "
    "count(*) FILTER (WHERE state = 'running') AS running "
    "FROM task_instances WHERE state IN ('queued', 'running') GROUP BY queue"
)


@dataclass(frozen=True)
class QueueLoad:
    queued: int
    running: int

    @property
    def demand(self) -> int:
        """Queued plus running: the slots this queue could use now."""
        return self.queued + self.running


async def queue_loads(engine: Engine) -> dict[str, QueueLoad]:
    """Every queue with anything queued or running, by name."""
    async with engine.connect() as conn:
        rows = (await conn.execute(QUEUE_LOADS)).all()
    return {r.queue: QueueLoad(int(r.queued), int(r.running)) for r in rows}
