"""Callbacks: which events of a task instance have callbacks, and outbox delivery bookkeeping.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from schedd_store.migrations.steps import execute_all

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UPGRADE = [
    # Events ('success', 'failure', 'retry') for which the task has callbacks; set at creation.
    "ALTER TABLE task_instances ADD COLUMN callback_events text[] NOT NULL DEFAULT '{}'",
    "ALTER TABLE outbox ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now()",
    "ALTER TABLE outbox ADD COLUMN last_error text",
    "ALTER TABLE outbox ADD COLUMN failed_at timestamptz",
    "DROP INDEX outbox_pending_idx",
    "CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at) "
    "WHERE delivered_at IS NULL AND failed_at IS NULL",
]

DOWNGRADE = [
    "DROP INDEX outbox_pending_idx",
    "CREATE INDEX outbox_pending_idx ON outbox (id) WHERE delivered_at IS NULL",
    "ALTER TABLE outbox DROP COLUMN failed_at",
    "ALTER TABLE outbox DROP COLUMN last_error",
    "ALTER TABLE outbox DROP COLUMN next_attempt_at",
    "ALTER TABLE task_instances DROP COLUMN callback_events",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
