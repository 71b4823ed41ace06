"""Successor hand-offs: the leader's standing decision about what runs next after a task succeeds.

``task_instances.handoff_ti``: the task instance the registry may queue and claim for the worker
that reports this task instance's success, in the same transaction as the result
(``schedd_store.handoffs``). ``handoff_after``: the other task instances that must have succeeded
by then. ``handoff_token``: the term that decided it (void once the fence moves on).
``handoff_control``: the run's ``control_version`` when it was decided (void after a clear, a mark
or a cancel). NULL everywhere means no hand-off.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from schedd_store.migrations.steps import execute_all

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE task_instances ADD COLUMN handoff_ti bigint, ADD COLUMN handoff_after bigint[], "
    "ADD COLUMN handoff_token bigint, ADD COLUMN handoff_control integer",
]

DOWNGRADE: list[str] = [
    "ALTER TABLE task_instances DROP COLUMN handoff_ti, DROP COLUMN handoff_after, "
    "DROP COLUMN handoff_token, DROP COLUMN handoff_control",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
