"""Schedules, catch-up and backfills.

- ``dags.next_interval_start`` / ``next_interval_end``: the next data interval whose scheduled run
  the leader will create; ``next_due_at``: when the leader must look at the DAG again (the end of
  that interval; NULL while it waits for something else, such as a run ending under
  max_active_runs). The timer reads the earliest ``next_due_at``: the work grows with the DAGs
  that are due, not with those registered. ``schedule_key``: the schedule fields of the latest
  version; a registration that changes them makes the leader plan the DAG afresh, after its
  latest scheduled run and after ``planned_until`` (where the previous schedule had got to, so
  runs deleted by retention are not made again).
- ``dag_runs.data_interval_start`` / ``data_interval_end`` for scheduled and backfill runs, and
  ``backfill_id`` for a backfill's runs.
- ``backfills`` and ``backfill_intervals``: a backfill and its intervals, in the order its runs
  are made (with the chunk of each, for the chunked strategy), each linked to its run once made
  and settled (succeeded, failed, skipped with a note) once that run ended; at most one running
  or paused backfill per DAG.
- ``task_instances.backfill``: whether the task instance belongs to a backfill run, for pools'
  fair sharing; ``pools.backfill_share``: the share of a pool backfills may hold while other runs
  wait for it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

UPGRADE = [
    "ALTER TABLE dags ADD COLUMN next_interval_start timestamptz",
    "ALTER TABLE dags ADD COLUMN next_interval_end timestamptz",
    "ALTER TABLE dags ADD COLUMN next_due_at timestamptz",
    "ALTER TABLE dags ADD COLUMN schedule_key text NOT NULL DEFAULT ''",
    "ALTER TABLE dags ADD COLUMN planned_until timestamptz",
    "CREATE INDEX dags_next_due_idx ON dags (next_due_at) WHERE next_due_at IS NOT NULL",
    "CREATE INDEX dags_held_idx ON dags (next_interval_end) "
    "WHERE next_due_at IS NULL AND next_interval_end IS NOT NULL",
    "CREATE TABLE backfills ("
    " id bigserial PRIMARY KEY,"
    " dag_id text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,"
    " start_date timestamptz NOT NULL,"
    " end_date timestamptz NOT NULL,"
    " strategy text NOT NULL CHECK (strategy IN ('sequential', 'parallel', 'chunked')),"
    " max_active_runs integer NOT NULL CHECK (max_active_runs > 0),"
    " chunk_size integer NOT NULL CHECK (chunk_size > 0),"
    " backward boolean NOT NULL,"
    " reprocess text NOT NULL CHECK (reprocess IN ('skip_existing', 'rerun_failed', 'rerun_all')),"
    " state text NOT NULL CHECK (state IN ('running', 'paused', 'succeeded', 'failed', 'cancelled')),"
    " error text,"
    " created_at timestamptz NOT NULL DEFAULT now(),"
    " updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE INDEX backfills_active_idx ON backfills (id) WHERE state IN ('running', 'paused')",
    # One backfill of a DAG at a time: two over the same intervals would race for their runs.
    "CREATE UNIQUE INDEX backfills_one_active_key ON backfills (dag_id) WHERE state IN ('running', 'paused')",
    "CREATE INDEX backfills_dag_idx ON backfills (dag_id, id)",
    "ALTER TABLE dag_runs ADD COLUMN data_interval_start timestamptz",
    "ALTER TABLE dag_runs ADD COLUMN data_interval_end timestamptz",
    "ALTER TABLE dag_runs ADD COLUMN backfill_id bigint REFERENCES backfills (id) ON DELETE SET NULL",
    "CREATE INDEX dag_runs_backfill_idx ON dag_runs (backfill_id) WHERE backfill_id IS NOT NULL",
    "CREATE INDEX dag_runs_dag_logical_idx ON dag_runs (dag_id, logical_date)",
    "CREATE TABLE backfill_intervals ("
    " backfill_id bigint NOT NULL REFERENCES backfills (id) ON DELETE CASCADE,"
    " position integer NOT NULL,"
    " chunk integer NOT NULL,"
    " interval_start timestamptz NOT NULL,"
    " interval_end timestamptz NOT NULL,"
    " status text NOT NULL CHECK (status IN ('pending', 'created', 'succeeded', 'failed', 'skipped')),"
    " note text NOT NULL DEFAULT '',"
    " run_pk bigint REFERENCES dag_runs (id) ON DELETE SET NULL,"
    " CONSTRAINT backfill_intervals_pkey PRIMARY KEY (backfill_id, position))",
    "CREATE INDEX backfill_intervals_status_idx ON backfill_intervals (backfill_id, status, position)",
    "ALTER TABLE task_instances ADD COLUMN backfill boolean NOT NULL DEFAULT false",
    "ALTER TABLE pools ADD COLUMN backfill_share double precision NOT NULL DEFAULT 0.5 "
    "CHECK (backfill_share >= 0 AND backfill_share <= 1)",
]

DOWNGRADE = [
    "ALTER TABLE pools DROP COLUMN backfill_share",
    "ALTER TABLE task_instances DROP COLUMN backfill",
    "DROP TABLE backfill_intervals",
    "DROP INDEX dag_runs_dag_logical_idx",
    "DROP INDEX dag_runs_backfill_idx",
    "ALTER TABLE dag_runs DROP COLUMN backfill_id",
    "ALTER TABLE dag_runs DROP COLUMN data_interval_end",
    "ALTER TABLE dag_runs DROP COLUMN data_interval_start",
    "DROP TABLE backfills",
    "DROP INDEX dags_held_idx",
    "DROP INDEX dags_next_due_idx",
    "ALTER TABLE dags DROP COLUMN planned_until",
    "ALTER TABLE dags DROP COLUMN schedule_key",
    "ALTER TABLE dags DROP COLUMN next_due_at",
    "ALTER TABLE dags DROP COLUMN next_interval_end",
    "ALTER TABLE dags DROP COLUMN next_interval_start",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
