"""Quiet successor hand-offs: a hand-off to its source's only downstream task.

``task_instances.handoff_quiet``: the hand-off in ``handoff_ti`` is to this task instance's only
downstream task, so once a registry uses it nothing else waits on this success and the leader is
told on ``schedd_runs_handed_off`` (looked at a little later) instead of ``schedd_runs``
(``schedd_core.handoffs``, ``schedd_scheduler.pending``).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05
"""

from schedd_store.migrations.steps import execute_all

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE task_instances ADD COLUMN handoff_quiet boolean NOT NULL DEFAULT false",
]

DOWNGRADE: list[str] = [
    "ALTER TABLE task_instances DROP COLUMN handoff_quiet",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
