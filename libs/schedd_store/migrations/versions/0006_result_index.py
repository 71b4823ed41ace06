"""An index of the task instances that stored a result, so a claim can tell cheaply whether a run
has any upstream results to hand out.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX task_instances_results_idx ON task_instances (run_pk) WHERE result IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX task_instances_results_idx")
