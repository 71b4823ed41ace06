"""Trigger timetables: a run's logical date apart from its data interval's start.

``dags.next_logical_date``: the logical date of the DAG's next scheduled run (a trigger run's is its
tick, the end of its interval). ``backfill_intervals.logical_date``: the logical date of an
interval's run. In both, NULL means the interval's start, as for every row written before.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from schedd_store.migrations.steps import execute_all

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE dags ADD COLUMN next_logical_date timestamptz",
    "ALTER TABLE backfill_intervals ADD COLUMN logical_date timestamptz",
]

DOWNGRADE: list[str] = [
    "ALTER TABLE backfill_intervals DROP COLUMN logical_date",
    "ALTER TABLE dags DROP COLUMN next_logical_date",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
