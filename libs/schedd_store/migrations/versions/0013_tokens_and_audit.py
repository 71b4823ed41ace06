"""Bearer tokens and the audit log.

- ``api_tokens``: one row per token: a public ``token_id`` (part of the token string, so a lookup
  is one index probe), the SHA-256 of its secret part (the secret itself is never stored), its
  ``role`` (viewer, operator, admin, or worker for the worker protocol), an optional worker id a
  worker token is bound to, optional expiry and the time it was revoked.
- ``audit_log``: every mutating call and every refused call: who (token name and role, or none),
  the method, the resource named in the request, its request id, the status code it ended with,
  the peer and when. Insert-only.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UPGRADE = [
    "CREATE TABLE api_tokens ("
    " token_id text PRIMARY KEY,"
    " name text NOT NULL UNIQUE,"
    " secret_sha256 text NOT NULL,"
    " role text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'worker')),"
    " worker_id text,"
    " created_at timestamptz NOT NULL DEFAULT now(),"
    " created_by text NOT NULL DEFAULT '',"
    " expires_at timestamptz,"
    " revoked_at timestamptz,"
    " CHECK (worker_id IS NULL OR role = 'worker'))",
    "CREATE TABLE audit_log ("
    " id bigserial PRIMARY KEY,"
    " at timestamptz NOT NULL DEFAULT clock_timestamp(),"
    " principal text NOT NULL,"
    " role text NOT NULL,"
    " method text NOT NULL,"
    " resource text NOT NULL DEFAULT '',"
    " request_id text NOT NULL DEFAULT '',"
    " code text NOT NULL,"
    " detail text NOT NULL DEFAULT '',"
    " peer text NOT NULL DEFAULT '')",
    "CREATE INDEX audit_log_at_idx ON audit_log (at)",
]

DOWNGRADE = ["DROP TABLE audit_log", "DROP TABLE api_tokens"]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
