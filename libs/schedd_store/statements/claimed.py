"""Statement parts: what a claim writes and returns, shared by the registry's claim
(``CLAIM_TASK_INSTANCES``) and a successor hand-off (``APPLY_RESULTS``)."""

from __future__ import annotations

#: What a claimed task instance returns from the UPDATE (``ti``) that moves it to running (each with a
#: random commit secret, returned here and stored only as its SHA-256: the proof a transactional task
#: gives schedd_commit_attempt; migration 0019). ``hands_off``: the task instance has a successor
#: hand-off (``schedd_store.handoffs``).
_CLAIMED_RETURNING = (
    "RETURNING ti.id, ti.run_pk, ti.task_id, ti.map_index, ti.try_number, ti.attempt_id, ti.worker_id, "
    "ti.queued_at, ti.first_poke_at, gen_random_uuid()::text AS commit_secret, "
    "ti.handoff_ti IS NOT NULL AS hands_off"
)
#: A claimed task instance's run (``c.run_pk``) looked up by its key for each claimed row: a lateral
#: subquery with a ``LIMIT`` is never flattened into a join, so even a generic plan (whose estimate
#: of the rows claimed is a guess) reads ``dag_runs`` by its primary key and never through
#: (``tests/integration/test_query_plans.py``).
_RUN_OF_CLAIMED = "CROSS JOIN LATERAL (SELECT * FROM dag_runs WHERE id = c.run_pk LIMIT 1)"
#: Records the attempts of the CTE ``claimed`` (:data:`_CLAIMED_RETURNING`), each with the DAG version
#: its run is pinned to at this moment: the code the attempt runs.
_RECORD_ATTEMPTS = (
    "recorded AS ("
    "  INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state, commit_secret_hash, "
    "  dag_version_id) "
    "  SELECT c.attempt_id, c.id, c.try_number, c.worker_id, 'running', "
    "  sha256(convert_to(c.commit_secret, 'UTF8')), cr.dag_version_id "
    f"  FROM claimed c {_RUN_OF_CLAIMED} cr"
    ")"
)
_CLAIMED_OWN = (
    "id", "task_id", "map_index", "try_number", "attempt_id", "run_pk", "worker_id", "queued_at",
    "first_poke_at", "commit_secret", "hands_off",
)  # fmt: skip
_CLAIMED_OF_RUN = (
    "dag_id", "run_id", "logical_date", "dag_version_id", "conf", "run_type", "data_interval_start",
    "data_interval_end", "trace_context",
)  # fmt: skip


#: Whether the run of a claimed task instance ``c`` stored a result: EXISTS, which the hand-off's
#: generic plan answers by looking the run up; and a scalar subquery, for the claim, whose generic
#: plan would answer an EXISTS by hashing every row of task_instances_results_idx (every result
#: stored, of every run; ``tests/integration/test_query_plans.py``). The scalar form costs the
#: hand-off's statement about 5 % of a chain link (interleaved pairs), so each keeps its own.
_STORED_EXISTS = "EXISTS (SELECT 1 FROM task_instances u WHERE u.run_pk = c.run_pk AND u.result IS NOT NULL)"
_STORED_BY_KEY = (
    "COALESCE((SELECT true FROM task_instances u WHERE u.run_pk = c.run_pk AND u.result IS NOT NULL "
    "LIMIT 1), false)"
)


def _claimed_columns(run: str, *, stored: str, prefix: str = "", results_also: str = "") -> str:
    """What an assignment is built from (``schedd_store.dispatch.claimed_attempt``), of a claimed
    task instance ``c`` and its run (alias ``run``), each column named with ``prefix``.
    ``run_has_results``: some task instance of the run stored a result, as the statement's snapshot
    shows (``stored``: :data:`_STORED_EXISTS` or :data:`_STORED_BY_KEY`), or ``results_also`` (an SQL
    condition: results written by the same statement)."""
    columns = [f"c.{name} AS {prefix}{name}" for name in _CLAIMED_OWN]
    columns += [f"{run}.{name} AS {prefix}{name}" for name in _CLAIMED_OF_RUN]
    columns.append(f"({stored}{f' OR {results_also}' if results_also else ''}) AS {prefix}run_has_results")
    return ", ".join(columns)


#: What a claim does once it knows which task instances go to which worker: a CTE ``claimable``
#: (``id``, ``n``) and a CTE ``slots`` (``worker_id``, ``n``) pair them; this moves them to running,
#: records their attempts and returns what their assignments are built from.
_CLAIM_TAIL = (
    "claimed AS ("
    "  UPDATE task_instances ti SET state = 'running', worker_id = slots.worker_id, started_at = now(), "
    "  claimed_at = now(), lost_reported = false FROM claimable JOIN slots USING (n) "
    f"  WHERE ti.id = claimable.id AND ti.state = ANY(:ti_sources) {_CLAIMED_RETURNING}"
    f"), {_RECORD_ATTEMPTS} "
    f"SELECT {_claimed_columns('r', stored=_STORED_BY_KEY)} FROM claimed c {_RUN_OF_CLAIMED} r"
)
