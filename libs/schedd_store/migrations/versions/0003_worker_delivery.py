"""Worker delivery: task logs, result values, lost attempts, worker incarnations and drains.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from schedd_store.migrations.steps import execute_all

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

UPGRADE = [
    # The value a task returned (JSON, size-limited by the worker), readable by downstream tasks.
    "ALTER TABLE task_instances ADD COLUMN result jsonb",
    # Attempts lost with their worker (crash, partition, hand-back) do not use up the task's retries.
    "ALTER TABLE task_instances ADD COLUMN lost_attempts integer NOT NULL DEFAULT 0",
    "ALTER TABLE task_attempts DROP CONSTRAINT task_attempts_state_check",
    "ALTER TABLE task_attempts ADD CONSTRAINT task_attempts_state_check "
    "CHECK (state IN ('running', 'success', 'failed', 'lost'))",
    "ALTER TABLE workers ADD COLUMN incarnation text NOT NULL DEFAULT ''",
    "ALTER TABLE workers ADD COLUMN running integer NOT NULL DEFAULT 0",
    "ALTER TABLE workers ADD COLUMN drain_requested boolean NOT NULL DEFAULT false",
    # Captured output of attempts, in chunks, appended by the registry.
    "CREATE TABLE task_logs ("
    " id bigserial PRIMARY KEY,"
    " ti_id bigint NOT NULL REFERENCES task_instances (id) ON DELETE CASCADE,"
    " try_number integer NOT NULL,"
    " attempt_id uuid NOT NULL,"
    " byte_offset bigint NOT NULL,"
    " data text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())",
    "CREATE INDEX task_logs_ti_try_idx ON task_logs (ti_id, try_number, byte_offset)",
    "CREATE INDEX task_instances_worker_running_idx ON task_instances (worker_id) WHERE state = 'running'",
]

DOWNGRADE = [
    "DROP INDEX task_instances_worker_running_idx",
    "DROP TABLE task_logs",
    "ALTER TABLE workers DROP COLUMN drain_requested",
    "ALTER TABLE workers DROP COLUMN running",
    "ALTER TABLE workers DROP COLUMN incarnation",
    "ALTER TABLE task_attempts DROP CONSTRAINT task_attempts_state_check",
    "ALTER TABLE task_attempts ADD CONSTRAINT task_attempts_state_check "
    "CHECK (state IN ('running', 'success', 'failed'))",
    "ALTER TABLE task_instances DROP COLUMN lost_attempts",
    "ALTER TABLE task_instances DROP COLUMN result",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
