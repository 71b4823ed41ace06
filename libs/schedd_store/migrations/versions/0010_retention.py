"""Retention: indexes that let the leader find what is old enough to delete, oldest first.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

UPGRADE = [
    "CREATE INDEX dag_runs_finished_idx ON dag_runs (ended_at) WHERE state IN ('success', 'failed')",
    "CREATE INDEX task_logs_created_idx ON task_logs (created_at)",
    "CREATE INDEX scheduler_passes_committed_idx ON scheduler_passes (committed_at)",
    "CREATE INDEX outbox_done_idx ON outbox (COALESCE(delivered_at, failed_at)) "
    "WHERE delivered_at IS NOT NULL OR failed_at IS NOT NULL",
    "CREATE INDEX workers_gone_idx ON workers (last_seen_at) WHERE state = 'gone'",
]

DOWNGRADE = [
    "DROP INDEX workers_gone_idx",
    "DROP INDEX outbox_done_idx",
    "DROP INDEX scheduler_passes_committed_idx",
    "DROP INDEX task_logs_created_idx",
    "DROP INDEX dag_runs_finished_idx",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
