"""Which version each attempt ran, runs known as cancelled, and a backfill's conf and version choice.

``task_attempts.dag_version_id``: the DAG version the attempt's run was pinned to when the attempt
was claimed (NULL for attempts claimed before this revision). A run moved to the DAG's current
version (``run_on_latest_version`` of clear, mark and backfill reruns) keeps, per attempt, the
version that ran. It is not a foreign key: a claim would then lock the version's row for every
attempt (one hot row share-locked by every claim, as the claim path must not be); a version is
deleted only with its DAG, which deletes the DAG's attempts in the same statement.

``dag_runs.cancelled``: the run ended because it was cancelled (its state is ``failed``).

``backfills.conf``: the conf of the runs the backfill creates (NULL: none). ``backfills.
run_on_latest_version``: runs it reruns move to the DAG's current version first.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from schedd_store.migrations.steps import execute_all

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE task_attempts ADD COLUMN dag_version_id bigint",
    "ALTER TABLE dag_runs ADD COLUMN cancelled boolean NOT NULL DEFAULT false",
    "ALTER TABLE backfills ADD COLUMN conf jsonb",
    "ALTER TABLE backfills ADD COLUMN run_on_latest_version boolean NOT NULL DEFAULT false",
]

DOWNGRADE: list[str] = [
    "ALTER TABLE backfills DROP COLUMN run_on_latest_version",
    "ALTER TABLE backfills DROP COLUMN conf",
    "ALTER TABLE dag_runs DROP COLUMN cancelled",
    "ALTER TABLE task_attempts DROP COLUMN dag_version_id",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
