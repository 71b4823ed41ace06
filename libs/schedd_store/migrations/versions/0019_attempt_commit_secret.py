"""The task role commits only its own attempt: a per-attempt secret checked by schedd_commit_attempt.

- ``task_attempts.commit_secret_hash``: SHA-256 of the attempt's *commit secret*, a random value
  (``gen_random_uuid()``, 122 random bits from PostgreSQL's strong random source) made by the
  claim that records the attempt. The claim hands the secret itself to the registry, which sends it
  on that attempt's assignment only; the database keeps nothing but its hash.
- ``schedd_commit_attempt(ti, attempt, try, secret, started, result)`` replaces the function of
  migration 0008 (still ``SECURITY DEFINER``, ``search_path`` pinned, executable by
  ``schedd_tasks`` only). It refuses, with ``insufficient_privilege`` and changing nothing, a call
  for a running attempt whose secret is not the one of that attempt; with the right secret it
  behaves as before: true once the attempt is marked succeeded, false (nothing changed) when the
  attempt is no longer running (whatever the secret: that is no news to anyone). Attempt and task
  instance ids are visible to viewers, so without the secret task code could commit another task's
  attempt.

Attempts claimed before this migration have no hash: a transactional task among them cannot commit,
fails and retries as a new attempt.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03
"""

import importlib

from schedd_store.migrations.steps import execute_all

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

OLD_SIGNATURE = "schedd_commit_attempt(bigint, uuid, integer, timestamptz, jsonb)"
SIGNATURE = "schedd_commit_attempt(bigint, uuid, integer, text, timestamptz, jsonb)"

UPGRADE = [
    "ALTER TABLE task_attempts ADD COLUMN commit_secret_hash bytea",
    f"DROP FUNCTION {OLD_SIGNATURE}",
    """CREATE FUNCTION schedd_commit_attempt(
    p_ti_id bigint, p_attempt_id uuid, p_try_number integer, p_secret text, p_started_at timestamptz,
    p_result jsonb
) RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  done record;
BEGIN
  UPDATE task_instances SET state = 'success', started_at = COALESCE(p_started_at, started_at),
    ended_at = now(), exit_code = 0, error = NULL, next_retry_at = NULL, result = p_result
  WHERE id = p_ti_id AND attempt_id = p_attempt_id AND try_number = p_try_number AND state = 'running'
    AND EXISTS (SELECT 1 FROM task_attempts a WHERE a.attempt_id = p_attempt_id AND a.ti_id = p_ti_id
      AND a.commit_secret_hash = sha256(convert_to(p_secret, 'UTF8')))
  RETURNING id, run_pk, dag_id, task_id, try_number, callback_events INTO done;
  IF NOT FOUND THEN
    PERFORM 1 FROM task_instances
    WHERE id = p_ti_id AND attempt_id = p_attempt_id AND try_number = p_try_number AND state = 'running';
    IF FOUND THEN
      RAISE EXCEPTION 'schedd_commit_attempt: p_secret is not the commit secret of attempt %',
        p_attempt_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN false;
  END IF;
  UPDATE task_attempts SET state = 'success', started_at = COALESCE(p_started_at, started_at),
    ended_at = now(), exit_code = 0
  WHERE attempt_id = p_attempt_id AND state = 'running';
  IF 'success' = ANY(done.callback_events) THEN
    INSERT INTO outbox (topic, payload) VALUES ('task_callback', jsonb_build_object(
      'event', 'success', 'ti_id', done.id, 'run_pk', done.run_pk, 'dag_id', done.dag_id,
      'task_id', done.task_id, 'try_number', done.try_number, 'error', NULL));
    PERFORM pg_notify('schedd_outbox', '');
  END IF;
  PERFORM pg_notify('schedd_runs', done.run_pk::text);
  RETURN true;
END $$""",
    f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC",
    f"""DO $$ BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'schedd_tasks') THEN
    GRANT EXECUTE ON FUNCTION {SIGNATURE} TO schedd_tasks;
  END IF;
END $$""",
]

#: Migration 0008's function, its revocation and its grant (its first statement creates the role).
_TASK_ROLE = importlib.import_module("schedd_store.migrations.versions.0008_task_role")

DOWNGRADE = [
    f"DROP FUNCTION {SIGNATURE}",
    "ALTER TABLE task_attempts DROP COLUMN commit_secret_hash",
    *_TASK_ROLE.UPGRADE[1:],
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
