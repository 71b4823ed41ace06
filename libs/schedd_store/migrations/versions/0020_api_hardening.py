"""Api hardening: counted unauthenticated calls.

``audit_log.count``: how many calls a row stands for. 1 for every row written so far and for each
audited call; more for the row that closes a window of repeated refused calls from one peer
(``schedd_rpc.refused_calls``).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03
"""

from schedd_store.migrations.steps import execute_all

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE audit_log ADD COLUMN count integer NOT NULL DEFAULT 1 "
    "CONSTRAINT audit_log_count_positive CHECK (count >= 1)",
]

DOWNGRADE: list[str] = ["ALTER TABLE audit_log DROP COLUMN count"]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
