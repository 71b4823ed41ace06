"""The scheduler's part of a run's trace: a span for each traced run a scheduling pass queued
task instances of.

Only with tracing on, and only after a pass that queued anything: the runs whose task instances
the pass wrote are read (in the background, so the next pass does not wait) and each traced one
(``dag_runs.trace_context`` set) gets a span ``schedule <dag>`` over the pass, a child of the
run's context, naming the task ids it queued. Best effort: a task instance that ended in the
moment between the pass and that read, or a read that fails, leaves the span out; a task
instance the pass wrote for another reason (a timeout, say) may be named too.
"""

from __future__ import annotations

import asyncio
import logging
import time

from opentelemetry.trace import SpanKind

from schedd_store.database import Engine
from schedd_store.observe import traced_runs_of
from schedd_telemetry import tracing

log = logging.getLogger(__name__)


class PassSpans:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._tracer = tracing.tracer("schedd.scheduler")
        self._pending: set[asyncio.Task[None]] = set()

    def passed(self, written: dict[int, set[int]], queued: int, seconds: float) -> None:
        """After a committed pass that took ``seconds``, queued ``queued`` task instances and wrote
        ``written`` (task instance ids by run)."""
        if not tracing.enabled() or not queued or not written:
            return
        ended = time.time_ns()
        ids = sorted({ti for tis in written.values() for ti in tis})
        task = asyncio.create_task(self._record(ids, ended - int(seconds * 1e9), ended))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _record(self, ids: list[int], started: int, ended: int) -> None:
        try:
            rows = await traced_runs_of(self._engine, ids)
        except Exception as exc:
            log.debug("no pass spans: %s", exc)
            return
        for row in rows:
            parent = tracing.parent(row.trace_context)
            if parent is None:
                continue
            span = self._tracer.start_span(
                f"schedule {row.dag_id}",
                context=parent,
                kind=SpanKind.INTERNAL,
                start_time=started,
                attributes={
                    "schedd.dag_id": row.dag_id,
                    "schedd.run_id": row.run_id,
                    "schedd.task_ids": row.task_ids,
                },
            )
            span.end(end_time=ended)
