"""Integrity: why a run failed when the scheduler gave up on it, and idempotent requests.

- ``dag_runs.error``: set when the leader could not plan a run (its pass raised on it alone) and
  failed it instead of letting it stall every other run.
- ``request_log``: one row per (method, request id) of a mutating API call that carried a
  request id: a hash of the request body and the resource it made. A retry with the same body
  gets the same resource; the same request id with another body is refused.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UPGRADE = [
    "ALTER TABLE dag_runs ADD COLUMN error text",
    "CREATE TABLE request_log ("
    " method text NOT NULL,"
    " request_id text NOT NULL,"
    " body_hash text NOT NULL,"
    " resource text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now(),"
    " CONSTRAINT request_log_pkey PRIMARY KEY (method, request_id))",
    "CREATE INDEX request_log_created_idx ON request_log (created_at)",
]

DOWNGRADE = [
    "DROP TABLE request_log",
    "ALTER TABLE dag_runs DROP COLUMN error",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
