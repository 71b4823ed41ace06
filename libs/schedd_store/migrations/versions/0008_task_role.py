"""Transactional tasks run as a role of their own and commit through one checked function.

- ``schedd_tasks``: a group role (no login) for the database roles transactional task code runs
  as. It gets no right on schedd's tables; users grant it what their tasks need on their own
  schemas. Created here when the migrating role may create roles (else by an administrator).
- ``schedd_commit_attempt(ti, attempt, try, started, result)``: ``SECURITY DEFINER``, the only
  thing ``schedd_tasks`` may execute. Inside the task's own transaction it marks the attempt
  succeeded, only while that exact attempt (task instance, try number, attempt id) is running,
  writes the ``success`` callback event to the outbox when the task has one, and wakes the
  scheduler. It returns false, changing nothing, for any other attempt.

The function's guard (``state = 'running'`` to ``success``) mirrors
``schedd_core.states.TASK_TRANSITIONS``;
``tests/e2e/test_transactional_tasks.py::test_task_code_cannot_change_schedds_tables`` and
``tests/security/test_task_role.py`` check both.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SIGNATURE = "schedd_commit_attempt(bigint, uuid, integer, timestamptz, jsonb)"

UPGRADE = [
    """DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'schedd_tasks') THEN
    CREATE ROLE schedd_tasks NOLOGIN;
  END IF;
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'cannot create the role schedd_tasks: CREATE ROLE schedd_tasks NOLOGIN as an administrator';
END $$""",
    """CREATE FUNCTION schedd_commit_attempt(
    p_ti_id bigint, p_attempt_id uuid, p_try_number integer, p_started_at timestamptz, p_result jsonb
) RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
  done record;
BEGIN
  UPDATE task_instances SET state = 'success', started_at = COALESCE(p_started_at, started_at),
    ended_at = now(), exit_code = 0, error = NULL, next_retry_at = NULL, result = p_result
  WHERE id = p_ti_id AND attempt_id = p_attempt_id AND try_number = p_try_number AND state = 'running'
  RETURNING id, run_pk, dag_id, task_id, try_number, callback_events INTO done;
  IF NOT FOUND THEN
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

DOWNGRADE = [f"DROP FUNCTION {SIGNATURE}"]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
