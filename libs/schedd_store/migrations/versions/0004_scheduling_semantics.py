"""Scheduling semantics: pools and limits, FIFO by logical date, branching, retries.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from schedd_store.migrations.steps import execute_all

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UPGRADE = [
    # Copied from the run when the task instance is created; never changes.
    "ALTER TABLE task_instances ADD COLUMN dag_id text",
    "ALTER TABLE task_instances ADD COLUMN logical_date timestamptz",
    "UPDATE task_instances ti SET dag_id = r.dag_id, logical_date = r.logical_date FROM dag_runs r "
    "WHERE r.id = ti.run_pk",
    "ALTER TABLE task_instances ALTER COLUMN dag_id SET NOT NULL",
    "ALTER TABLE task_instances ALTER COLUMN logical_date SET NOT NULL",
    # A branch task's choice: the downstream task ids it follows (set with its successful result).
    "ALTER TABLE task_instances ADD COLUMN is_branch boolean NOT NULL DEFAULT false",
    "ALTER TABLE task_instances ADD COLUMN follow text[]",
    # Equal priority runs first-in first-out by logical date.
    "DROP INDEX task_instances_claim_idx",
    "CREATE INDEX task_instances_claim_idx ON task_instances (queue, priority_weight DESC, logical_date, id) "
    "WHERE state = 'queued'",
    "CREATE INDEX task_instances_waiting_idx "
    "ON task_instances (pool, priority_weight DESC, logical_date, id) WHERE state = 'scheduled'",
    "CREATE INDEX task_instances_occupying_idx ON task_instances (pool, dag_id, task_id) "
    "WHERE state IN ('queued', 'running')",
    "CREATE INDEX task_instances_retry_idx ON task_instances (next_retry_at) WHERE state = 'up_for_retry'",
    "CREATE INDEX dag_runs_running_idx ON dag_runs (started_at) WHERE state = 'running'",
    "CREATE INDEX dag_runs_queued_idx ON dag_runs (dag_id, logical_date) WHERE state = 'queued'",
]

DOWNGRADE = [
    "DROP INDEX dag_runs_queued_idx",
    "DROP INDEX dag_runs_running_idx",
    "DROP INDEX task_instances_retry_idx",
    "DROP INDEX task_instances_occupying_idx",
    "DROP INDEX task_instances_waiting_idx",
    "DROP INDEX task_instances_claim_idx",
    "CREATE INDEX task_instances_claim_idx ON task_instances (queue, priority_weight DESC, queued_at, id) "
    "WHERE state = 'queued'",
    "ALTER TABLE task_instances DROP COLUMN follow",
    "ALTER TABLE task_instances DROP COLUMN is_branch",
    "ALTER TABLE task_instances DROP COLUMN logical_date",
    "ALTER TABLE task_instances DROP COLUMN dag_id",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
