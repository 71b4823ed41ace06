"""Trace context of runs.

- ``dag_runs.trace_context``: the W3C ``traceparent`` of the span the run was created in (the
  api's ``CreateRun`` call, when the api traces), so the scheduler's, the registry's and the
  workers' spans for the run's tasks join that trace; NULL for an untraced run.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

UPGRADE = ["ALTER TABLE dag_runs ADD COLUMN trace_context text"]

DOWNGRADE = ["ALTER TABLE dag_runs DROP COLUMN trace_context"]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
