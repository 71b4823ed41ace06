"""An append-only log of committed scheduling passes, each stamped with its term's token.

It makes the fencing promise checkable after the fact: no pass of a term commits after a
newer term raised the fence.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE scheduler_passes ("
        " id bigserial PRIMARY KEY,"
        " token bigint NOT NULL,"
        " committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
        " runs integer NOT NULL,"
        " queued integer NOT NULL)"
    )
    op.execute("CREATE INDEX scheduler_passes_token_idx ON scheduler_passes (token, committed_at)")


def downgrade() -> None:
    op.execute("DROP TABLE scheduler_passes")
