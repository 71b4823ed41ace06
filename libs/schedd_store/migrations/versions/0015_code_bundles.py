"""Code bundles.

- ``code_bundles``: the archive of each code bundle, content-addressed by its SHA-256 (lowercase
  hex, the primary key), with its size and when it was first stored. Insert-only: a bundle is
  never changed; DAG versions name theirs in ``spec.code_bundle``.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UPGRADE = [
    "CREATE TABLE code_bundles ("
    " sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),"
    " archive bytea NOT NULL,"
    " size_bytes bigint NOT NULL CHECK (size_bytes = octet_length(archive)),"
    " created_at timestamptz NOT NULL DEFAULT now())"
]

DOWNGRADE = ["DROP TABLE code_bundles"]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
