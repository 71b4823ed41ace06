"""Statements: dispatch (registry)."""

from __future__ import annotations

from schedd_core.states import AttemptState, TaskState, WorkerState
from schedd_store import channels
from schedd_store.statements.assets import _OUTLET_EVENTS
from schedd_store.statements.claimed import _CLAIM_TAIL
from schedd_store.statements.guards import _guarded, _sql
from schedd_store.statements.handoffs import (
    _HAND_OFF,
    _HAND_OFF_MOVES,
    _HAND_OFF_VIA,
    _HANDED_OFF_COLUMNS,
    _HANDED_OFF_JOINS,
)

# --- dispatch (registry) ---------------------------------------------------------------------------

#: Claims queued task instances of the given queues for the workers in :slots (a worker id per free
#: slot; the first slots get the most important task instances), highest priority first, oldest
#: logical date first among equals. Each queue is read on its own (a LATERAL index scan of
#: task_instances_claim_idx that stops after as many rows as there are slots), so a claim costs the
#: same with 100,000 task instances queued as with ten. SKIP LOCKED lets several registries claim side
#: by side without ever handing out one attempt twice. Then :data:`_CLAIM_TAIL`.
CLAIM_TASK_INSTANCES = _guarded(
    "WITH candidates AS ("
    "  SELECT c.id, c.priority_weight, c.logical_date FROM unnest(CAST(:queues AS text[])) AS q(name) "
    "  CROSS JOIN LATERAL (SELECT id, priority_weight, logical_date FROM task_instances "
    "    WHERE state = 'queued' AND queue = q.name ORDER BY priority_weight DESC, logical_date, id "
    "    LIMIT cardinality(CAST(:slots AS text[])) FOR UPDATE SKIP LOCKED) AS c"
    "), claimable AS ("
    "  SELECT id, row_number() OVER (ORDER BY priority_weight DESC, logical_date, id) AS n FROM candidates "
    "  ORDER BY priority_weight DESC, logical_date, id LIMIT cardinality(CAST(:slots AS text[]))"
    "), slots AS ("
    "  SELECT worker_id, n FROM unnest(CAST(:slots AS text[])) WITH ORDINALITY AS s(worker_id, n)"
    "), " + _CLAIM_TAIL,
    ti=({TaskState.QUEUED}, {TaskState.RUNNING}),
)

#: Applies a batch of attempt results. Each row changes only while its attempt is current, running
#: and held by the worker whose stream reported it (``ti.worker_id = r.worker_id``); the attempt's
#: history row changes with it. A success whose attempt is in :handing_off also starts its
#: successor hand-off, in this statement (``statements.handoffs._HAND_OFF``). Everything a result
#: entails is written by this one statement, so it needs no transaction of its own: the callbacks
#: it queues (and a notification for them), the events of a success's outlets and the DAGs they
#: queue (``statements.assets._OUTLET_EVENTS``). Returns a row per result applied, with what was
#: handed off for it (``handed_*``), and tells the leader of each.
APPLY_RESULTS = _guarded(
    "WITH r AS ("
    "  SELECT * FROM unnest(CAST(:ti_ids AS bigint[]), CAST(:attempt_ids AS uuid[]), "
    "  CAST(:try_numbers AS int[]), CAST(:targets AS text[]), CAST(:exit_codes AS int[]), "
    "  CAST(:errors AS text[]), CAST(:started AS timestamptz[]), CAST(:ended AS timestamptz[]), "
    "  CAST(:results AS jsonb[]), CAST(:no_retries AS boolean[]), CAST(:worker_ids AS text[])) "
    "  AS r(ti_id, attempt_id, try_number, target, exit_code, error, started_at, ended_at, result, no_retry, "
    "  worker_id)"
    "), locked AS ("
    "  SELECT id FROM task_instances WHERE id IN (SELECT ti_id FROM r) ORDER BY id FOR UPDATE"
    "), applied AS ("
    "  UPDATE task_instances ti SET "
    "  state = CASE WHEN r.target = 'failed' AND ti.try_number < ti.max_tries AND NOT r.no_retry "
    "    THEN 'up_for_retry' "
    "    ELSE r.target END, "
    "  next_retry_at = NULL, first_poke_at = NULL, "
    "  follow = CASE WHEN ti.is_branch AND r.target = 'success' THEN CASE jsonb_typeof(r.result) "
    "    WHEN 'string' THEN ARRAY[r.result #>> '{}'] "
    "    WHEN 'array' THEN ARRAY(SELECT jsonb_array_elements_text(r.result)) "
    "    ELSE ARRAY[]::text[] END END, "
    "  started_at = COALESCE(r.started_at, ti.started_at), "
    "  ended_at = r.ended_at, exit_code = r.exit_code, "
    "  error = NULLIF(r.error, ''), result = r.result "
    "  FROM r JOIN locked ON locked.id = r.ti_id "
    "  WHERE ti.id = r.ti_id AND ti.attempt_id = r.attempt_id AND ti.try_number = r.try_number "
    "  AND ti.worker_id = r.worker_id AND ti.state = ANY(:ti_sources) "
    "  RETURNING ti.id, ti.run_pk, ti.attempt_id, ti.state, ti.callback_events, ti.dag_id, ti.task_id, "
    "  ti.try_number, ti.error, ti.result, ti.worker_id, ti.pool, ti.pool_slots, ti.handoff_ti, "
    "  ti.handoff_after, ti.handoff_token, ti.handoff_control, ti.handoff_quiet"
    "), callbacks AS ("
    "  INSERT INTO outbox (topic, payload) "
    "  SELECT 'task_callback', jsonb_build_object('event', e.event, 'ti_id', applied.id, 'run_pk', "
    "    applied.run_pk, 'dag_id', applied.dag_id, 'task_id', applied.task_id, 'try_number', "
    "    applied.try_number, 'error', applied.error) "
    "  FROM applied CROSS JOIN LATERAL (SELECT CASE applied.state WHEN 'success' THEN 'success' "
    "    WHEN 'failed' THEN 'failure' WHEN 'up_for_retry' THEN 'retry' END AS event) e "
    "  WHERE e.event = ANY(applied.callback_events) RETURNING id"
    "), history AS ("
    "  UPDATE task_attempts a SET state = r.target, started_at = COALESCE(r.started_at, a.started_at), "
    "  ended_at = r.ended_at, exit_code = r.exit_code, "
    "  error = NULLIF(r.error, '') FROM r JOIN applied ON applied.attempt_id = r.attempt_id "
    "  WHERE a.attempt_id = r.attempt_id AND a.state = ANY(:attempt_sources)"
    f"), {_OUTLET_EVENTS}, {_HAND_OFF} "
    "SELECT a.id, a.run_pk, a.attempt_id, a.state, "
    f"(SELECT count(*) FROM (SELECT pg_notify('{channels.OUTBOX}', '') FROM callbacks LIMIT 1) cb) "
    "AS callbacks, "
    "(SELECT count(*) FROM notified) AS asset_dags, "
    f"{_HANDED_OFF_COLUMNS} FROM applied a {_HANDED_OFF_JOINS}",
    via=_HAND_OFF_VIA,
    ti=({TaskState.RUNNING}, {TaskState.SUCCESS, TaskState.FAILED, TaskState.UP_FOR_RETRY}),
    attempt=({AttemptState.RUNNING}, {AttemptState.SUCCESS, AttemptState.FAILED}),
    **_HAND_OFF_MOVES,
)

#: The recorded outcome of attempts (the whole attempt: id and try number), and whether the reporting
#: worker is the one the attempt was claimed for, to tell a repeated report from a stale one and from
#: one about another worker's attempt. Only the answer to the worker depends on it: every change is
#: conditional on the worker in its own statement.
ATTEMPT_OUTCOMES = _sql(
    "SELECT a.attempt_id, a.state, a.worker_id = r.worker_id AS held FROM task_attempts a "
    "JOIN unnest(CAST(:ids AS uuid[]), CAST(:try_numbers AS int[]), CAST(:worker_ids AS text[])) "
    "AS r(attempt_id, try_number, worker_id) "
    "ON a.attempt_id = r.attempt_id AND a.try_number = r.try_number"
)

#: Records a connecting worker with the windows its registry granted it (see FAIL_OVER_LOST_ATTEMPTS).
#: No row while the worker id has a live stream: its row is live (:live_states, active or draining)
#: under another incarnation and was heard within its silence limit (a second stream must not take
#: it over). The same incarnation reconnecting (its old stream broken, on this registry or another)
#: is admitted, as is a new one once the old stream ended (the row is gone) or went silent past its
#: limit.
#: :replace_live admits it regardless (a scheduler's local executor, which has no stream).
UPSERT_WORKER = _guarded(
    "INSERT INTO workers (worker_id, hostname, queues, capacity, code_version, state, registry, incarnation, "
    "registered_at, last_seen_at, heartbeat_at, fence_window, silence_limit) VALUES (:worker_id, :hostname, "
    ":queues, :capacity, :code_version, 'active', :registry, :incarnation, now(), now(), now(), "
    ":fence_window, :silence_limit) ON CONFLICT (worker_id) DO UPDATE SET "
    "hostname = EXCLUDED.hostname, queues = EXCLUDED.queues, capacity = EXCLUDED.capacity, "
    "code_version = EXCLUDED.code_version, registry = EXCLUDED.registry, last_seen_at = now(), "
    "heartbeat_at = now(), fence_window = EXCLUDED.fence_window, silence_limit = EXCLUDED.silence_limit, "
    "drain_requested = workers.drain_requested AND workers.incarnation = EXCLUDED.incarnation, "
    "state = CASE WHEN workers.drain_requested AND workers.incarnation = EXCLUDED.incarnation "
    "  THEN 'draining' ELSE 'active' END, "
    "incarnation = EXCLUDED.incarnation WHERE workers.state = ANY(:worker_sources) "
    "AND (:replace_live OR NOT workers.state = ANY(:live_states) "
    "  OR workers.incarnation = EXCLUDED.incarnation "
    "  OR workers.heartbeat_at < now() - make_interval(secs => workers.silence_limit)) "
    "RETURNING drain_requested",
    worker=(set(WorkerState), {WorkerState.ACTIVE, WorkerState.DRAINING}),
)

#: The stream of one incarnation on one registry ended (a newer stream of the worker keeps its row).
MARK_WORKER_GONE = _guarded(
    "UPDATE workers SET state = 'gone', last_seen_at = now() WHERE worker_id = :worker_id "
    "AND registry = :registry AND incarnation = :incarnation AND state = ANY(:worker_sources)",
    worker=({WorkerState.ACTIVE, WorkerState.DRAINING}, {WorkerState.GONE}),
)

#: Where and how recently a worker id's live stream was heard (for the message refusing a second one).
LIVE_WORKER = _sql(
    "SELECT registry, EXTRACT(EPOCH FROM now() - heartbeat_at) AS silent_for FROM workers "
    "WHERE worker_id = :worker_id"
)
