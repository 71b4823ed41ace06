"""Statements: sensor outcomes (registry), conditional on the attempt they report."""

from __future__ import annotations

from schedd_core.states import AttemptState, TaskState
from schedd_store import channels
from schedd_store.statements.guards import _guarded

# --- sensor outcomes (registry) --------------------------------------------------------------------

#: Applies a batch of sensor outcomes: a reschedule-mode poke that said "not yet" (target
#: 'up_for_reschedule', with the time of the next poke) or a soft-fail sensor past its timeout
#: (target 'skipped'). Each row changes only while its attempt is current, running and held by the
#: worker that reports it; a reschedule
#: keeps the try (``first_poke_at`` is set to the try's first poke, so queueing the next poke does not
#: add to the try number) and frees the worker and pool slots. The attempt's history row changes with
#: it. Wakes the leader for every run touched. Returns the rows applied.
APPLY_SENSOR_OUTCOMES = _guarded(
    "WITH r AS ("
    "  SELECT * FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), "
    "  CAST(:try_numbers AS int[]), CAST(:targets AS text[]), CAST(:errors AS text[]), "
    "  CAST(:started AS timestamptz[]), CAST(:ended AS timestamptz[]), CAST(:next_pokes AS timestamptz[]), "
    "  CAST(:worker_ids AS text[])) "
    "  AS r(ti_id, attempt_id, try_number, target, error, started_at, ended_at, next_poke, worker_id)"
    "), locked AS ("
    "  SELECT id FROM task_instances WHERE id IN (SELECT ti_id FROM r) ORDER BY id FOR UPDATE"
    "), applied AS ("
    "  UPDATE task_instances ti SET state = r.target, "
    "  next_retry_at = CASE WHEN r.target = 'up_for_reschedule' THEN r.next_poke END, "
    "  first_poke_at = CASE WHEN r.target = 'up_for_reschedule' "
    "    THEN COALESCE(ti.first_poke_at, r.started_at, ti.started_at) END, "
    "  started_at = COALESCE(r.started_at, ti.started_at), ended_at = r.ended_at, "
    "  worker_id = NULL, exit_code = NULL, error = NULLIF(r.error, '') "
    "  FROM r JOIN locked ON locked.id = r.ti_id "
    "  WHERE ti.id = r.ti_id AND ti.attempt_id = r.attempt_id AND ti.try_number = r.try_number "
    "  AND ti.worker_id = r.worker_id AND ti.state = ANY(:ti_sources) "
    "  RETURNING ti.id, ti.run_pk, ti.attempt_id"
    "), history AS ("
    "  UPDATE task_attempts a "
    "  SET state = CASE WHEN r.target = 'skipped' THEN 'skipped' ELSE 'rescheduled' END, "
    "  started_at = COALESCE(r.started_at, a.started_at), ended_at = r.ended_at, "
    "  error = NULLIF(r.error, '') FROM r JOIN applied ON applied.attempt_id = r.attempt_id "
    "  WHERE a.attempt_id = r.attempt_id AND a.state = ANY(:attempt_sources)"
    ") "
    f"SELECT id, run_pk, attempt_id, pg_notify('{channels.RUNS}', run_pk::text || '/' || id::text) "
    "FROM applied",
    ti=({TaskState.RUNNING}, {TaskState.UP_FOR_RESCHEDULE, TaskState.SKIPPED}),
    attempt=({AttemptState.RUNNING}, {AttemptState.RESCHEDULED, AttemptState.SKIPPED}),
)
