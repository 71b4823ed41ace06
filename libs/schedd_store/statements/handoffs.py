"""Statements: successor hand-offs (``schedd_core.handoffs``, ``schedd_store.handoffs``)."""

from __future__ import annotations

from schedd_core.states import TaskState
from schedd_store import channels
from schedd_store.statements.claimed import (
    _CLAIMED_RETURNING,
    _RECORD_ATTEMPTS,
    _STORED_EXISTS,
    _claimed_columns,
)
from schedd_store.statements.guards import _sql

# --- successor hand-offs ---------------------------------------------------------------------------

#: The leader's hand-offs (inside its fenced pass): for each :sources task instance, the
#: :targets task instance that may start when it succeeds, the task instances that must have
#: succeeded by then (the pairs :after_of / :after_ids), whether it is quiet (:quiets, the target is
#: the source's only downstream task), the term (:token) and the control version of the run it was
#: planned at (:controls). Rows another transaction holds are skipped (SKIP LOCKED), and rows that
#: already say the same are not written again. Returns the rows in place.
SET_HANDOFFS = _sql(
    "WITH h AS (SELECT * FROM unnest(CAST(:sources AS bigint[]), CAST(:targets AS bigint[]), "
    "  CAST(:controls AS int[]), CAST(:quiets AS boolean[])) AS h(source, target, control, quiet)), "
    "free AS (SELECT t.id FROM task_instances t JOIN h ON h.source = t.id ORDER BY t.id "
    "  FOR UPDATE OF t SKIP LOCKED), "
    "written AS ("
    "  UPDATE task_instances t SET handoff_ti = h.target, handoff_token = :token, "
    "  handoff_control = h.control, handoff_quiet = h.quiet, handoff_after = ARRAY("
    "    SELECT a.after_id FROM unnest(CAST(:after_of AS bigint[]), CAST(:after_ids AS bigint[])) "
    "    AS a(source, after_id) WHERE a.source = h.source) "
    "  FROM h JOIN free ON free.id = h.source WHERE t.id = h.source "
    "  AND (t.handoff_ti, t.handoff_token, t.handoff_control, t.handoff_quiet) "
    "    IS DISTINCT FROM (h.target, :token, h.control, h.quiet) "
    "  RETURNING t.id"
    ") "
    "SELECT id FROM free"
)

#: Part of ``APPLY_RESULTS`` (its CTE ``applied``, the results it applied, is ``x`` here): queues and
#: claims the hand-off of each task instance that just succeeded and whose attempt is in
#: :handing_off (its worker kept a credit for it), for that worker, when everything the leader
#: assumed still holds, checked here under the fence row's shared lock:
#: - the hand-off is of the current term (the fence's token) and of the run's current control
#:   version (no clear, mark or cancel since), the run is running and its DAG is not paused;
#: - the source succeeded, the target has not started (none or scheduled), and every task instance
#:   the hand-off waits for had succeeded before this statement;
#: - the worker is active and serves the target's queue;
#: - the target takes no more of the pool than the source gives back, no task instance waiting in
#:   that pool for a slot goes before it in the leader's admission order (priority weight, then
#:   logical date, then id: ``WAITING_IN_POOL``), the pool is within its size once the source's
#:   slots are free, and no task instance of higher priority waits in the target's queue.
#: The target is queued and claimed in one write (none -> queued -> running: a fresh attempt,
#: ``queued_at`` = ``started_at``, stamped with the fence token) and its attempt recorded as a claim
#: records it (``statements.claimed``). CTE ``claimed``: the task instances started, each with its
#: ``source``.
_HAND_OFF = (
    "fence AS (SELECT token FROM scheduler_fence WHERE id = 1 FOR SHARE), "
    "eligible AS ("
    "  SELECT DISTINCT ON (y.id) y.id, x.id AS source, x.worker_id FROM applied x "
    "  JOIN task_instances y ON y.id = x.handoff_ti AND y.run_pk = x.run_pk "
    "  JOIN dag_runs xr ON xr.id = x.run_pk "
    "  JOIN workers w ON w.worker_id = x.worker_id "
    "  JOIN pools p ON p.name = y.pool "
    "  WHERE x.state = 'success' AND x.attempt_id = ANY(CAST(:handing_off AS uuid[])) "
    "  AND x.handoff_token = (SELECT token FROM fence) "
    "  AND x.handoff_control = xr.control_version AND xr.state = 'running' "
    # the DAG looked up by its key (a scalar subquery, no join): a generic plan may otherwise read
    # every DAG to hash them (tests/integration/test_query_plans.py); a missing DAG hands off nothing
    "  AND NOT (SELECT paused FROM dags WHERE dag_id = xr.dag_id) "
    "  AND y.state = ANY(:ti_handoff_sources) AND w.state = 'active' AND y.queue = ANY(w.queues) "
    "  AND y.pool = x.pool AND y.pool_slots <= x.pool_slots "
    "  AND NOT EXISTS (SELECT 1 FROM task_instances u WHERE u.id = ANY(x.handoff_after) "
    "    AND u.state <> 'success') "
    # the first task instance waiting in the pool, in admission order (one probe of the waiting index)
    "  AND NOT EXISTS (SELECT 1 FROM (SELECT s.priority_weight, s.logical_date, s.id FROM task_instances s "
    "    WHERE s.state = 'scheduled' AND s.pool = y.pool "
    "    ORDER BY s.priority_weight DESC, s.logical_date, s.id LIMIT 1) f "
    "    WHERE (-f.priority_weight, f.logical_date, f.id) < (-y.priority_weight, y.logical_date, y.id)) "
    "  AND NOT EXISTS (SELECT 1 FROM task_instances q WHERE q.state = 'queued' AND q.queue = y.queue "
    "    AND q.priority_weight > y.priority_weight) "
    # the source still counts as running in this statement's snapshot of the pool's occupancy
    "  AND (SELECT COALESCE(sum(o.slots), 0) FROM ("
    "    SELECT slots FROM pool_occupancy WHERE pool = y.pool "
    "    UNION ALL SELECT slots FROM occupancy_deltas WHERE pool = y.pool) AS o) "
    "    - x.pool_slots + y.pool_slots <= p.slots "
    "  ORDER BY y.id"
    "), claimed AS ("
    "  UPDATE task_instances ti SET state = 'running', "
    "  try_number = try_number + CASE WHEN first_poke_at IS NULL THEN 1 ELSE 0 END, "
    "  attempt_id = gen_random_uuid(), queued_at = now(), started_at = now(), claimed_at = now(), "
    "  ended_at = NULL, lost_reported = false, next_retry_at = NULL, worker_id = e.worker_id, "
    "  exit_code = NULL, error = NULL, fence_token = (SELECT token FROM fence) "
    "  FROM eligible e WHERE ti.id = e.id AND ti.state = ANY(:ti_handoff_sources) "
    f"  {_CLAIMED_RETURNING}, e.source"
    f"), {_RECORD_ATTEMPTS}"
)
#: The moves of :data:`_HAND_OFF`, for ``_guarded``.
_HAND_OFF_MOVES = {"ti_handoff": ({TaskState.NONE, TaskState.SCHEDULED}, {TaskState.RUNNING})}
_HAND_OFF_VIA = {"ti_handoff": TaskState.QUEUED}
#: What ``APPLY_RESULTS`` returns of each result's hand-off (its applied row ``a``, the started task
#: instance ``c`` and its run ``hr``; NULL columns when nothing was handed off), prefixed ``handed_``,
#: and the notification that tells the leader of both: on ``schedd_runs_handed_off`` for a quiet
#: hand-off that was used (nothing else waits on that success: the leader may look later), else on
#: ``schedd_runs``.
_HANDED_OFF_COLUMNS = (
    _claimed_columns(
        "hr",
        stored=_STORED_EXISTS,
        prefix="handed_",
        results_also="EXISTS (SELECT 1 FROM applied ar WHERE ar.run_pk = c.run_pk AND ar.result IS NOT NULL)",
    )
    + ", pg_notify("
    f"  CASE WHEN c.id IS NOT NULL AND a.handoff_quiet THEN '{channels.RUNS_HANDED_OFF}' "
    f"  ELSE '{channels.RUNS}' END, "
    "  a.run_pk::text || '/' || a.id::text || COALESCE(',' || c.run_pk::text || '/' || c.id::text, '')) "
    "AS told"
)
_HANDED_OFF_JOINS = "LEFT JOIN claimed c ON c.source = a.id LEFT JOIN dag_runs hr ON hr.id = c.run_pk"
