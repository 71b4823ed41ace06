"""Variables, connections and deadline alerts.

- ``variables`` / ``connections``: a value encrypted with the deployment's key (a Fernet token; a
  connection's value is its JSON form), and the DAG ids it is granted to (empty: every DAG);
- ``deadline_misses``: one row per run whose deadline passed while it was unfinished, written by the
  leader in a fenced transaction together with the outbox event of the miss; its primary key makes
  a second record of the same miss impossible (a new leader repeating the work writes nothing);
- role ``secrets``: an admin that may also read variable and connection values back.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from schedd_store.migrations.steps import execute_all

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "CREATE TABLE variables ("
    " key text PRIMARY KEY, value bytea NOT NULL, description text NOT NULL DEFAULT '',"
    " dag_ids text[] NOT NULL DEFAULT '{}', updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE connections ("
    " conn_id text PRIMARY KEY, value bytea NOT NULL, description text NOT NULL DEFAULT '',"
    " dag_ids text[] NOT NULL DEFAULT '{}', updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE deadline_misses ("
    " run_pk bigint PRIMARY KEY REFERENCES dag_runs (id) ON DELETE CASCADE,"
    " deadline_at timestamptz NOT NULL, missed_at timestamptz NOT NULL DEFAULT now(),"
    " fence_token bigint NOT NULL)",
    "ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check",
    "ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check "
    "CHECK (role IN ('viewer', 'operator', 'admin', 'secrets', 'worker', 'enroll'))",
]

DOWNGRADE: list[str] = [
    "DELETE FROM api_tokens WHERE role = 'secrets'",
    "ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check",
    "ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check "
    "CHECK (role IN ('viewer', 'operator', 'admin', 'worker', 'enroll'))",
    "DROP TABLE deadline_misses",
    "DROP TABLE connections",
    "DROP TABLE variables",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
