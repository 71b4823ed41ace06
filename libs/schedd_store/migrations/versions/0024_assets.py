"""Assets and their events; DAGs scheduled on assets; runs made by asset events.

``assets``: one row per normalised URI. ``asset_events``: one row per update, from a task's success
(written in the result's transaction), the api or a watcher; ``idempotency_key`` (unique) makes a
retried write (a redelivered message, a repeated request) record nothing new. ``dag_asset_refs``:
the assets each DAG version schedules on, updates (outlets) and reads (inlets). ``asset_dag_queue``:
the events each asset-scheduled DAG has not consumed yet, written with the event.
``asset_event_consumptions``: which run of a DAG consumed each event; its primary key (dag, event)
makes a second consumption by the same DAG impossible. ``asset_watcher_cursors``: how far a table
watcher has read, advanced in the transaction that records its events.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04
"""

from schedd_store.migrations.steps import execute_all

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE dag_runs DROP CONSTRAINT dag_runs_run_type_check",
    "ALTER TABLE dag_runs ADD CONSTRAINT dag_runs_run_type_check "
    "CHECK (run_type IN ('manual','scheduled','backfill','asset_triggered'))",
    """CREATE TABLE assets (
        id          bigserial PRIMARY KEY,
        uri         text NOT NULL CONSTRAINT assets_uri_key UNIQUE,
        name        text NOT NULL DEFAULT '',
        created_at  timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE asset_events (
        id              bigserial PRIMARY KEY,
        asset_id        bigint NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
        extra           jsonb NOT NULL DEFAULT '{}'::jsonb,
        source          text NOT NULL CHECK (source IN ('task','api','watcher')),
        source_dag_id   text,
        source_run_pk   bigint REFERENCES dag_runs (id) ON DELETE SET NULL,
        source_task_id  text,
        source_watcher  text,
        idempotency_key text CONSTRAINT asset_events_idempotency_key UNIQUE,
        created_at      timestamptz NOT NULL DEFAULT now()
    )""",
    "CREATE INDEX asset_events_asset_idx ON asset_events (asset_id, id)",
    """CREATE TABLE dag_asset_refs (
        version_id  bigint NOT NULL REFERENCES dag_versions (id) ON DELETE CASCADE,
        dag_id      text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,
        role        text NOT NULL CHECK (role IN ('schedule','outlet','inlet')),
        task_id     text NOT NULL DEFAULT '',
        asset_id    bigint NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
        PRIMARY KEY (version_id, role, task_id, asset_id)
    )""",
    "CREATE INDEX dag_asset_refs_asset_idx ON dag_asset_refs (asset_id, role)",
    """CREATE TABLE asset_dag_queue (
        dag_id      text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,
        event_id    bigint NOT NULL REFERENCES asset_events (id) ON DELETE CASCADE,
        PRIMARY KEY (dag_id, event_id)
    )""",
    """CREATE TABLE asset_event_consumptions (
        dag_id      text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,
        event_id    bigint NOT NULL REFERENCES asset_events (id) ON DELETE CASCADE,
        run_pk      bigint NOT NULL REFERENCES dag_runs (id) ON DELETE CASCADE,
        fence_token bigint NOT NULL,
        CONSTRAINT asset_event_consumptions_pkey PRIMARY KEY (dag_id, event_id)
    )""",
    "CREATE INDEX asset_event_consumptions_run_idx ON asset_event_consumptions (run_pk)",
    """CREATE TABLE asset_watcher_cursors (
        watcher     text PRIMARY KEY,
        position    bigint NOT NULL,
        fence_token bigint NOT NULL
    )""",
]

DOWNGRADE: list[str] = [
    "DROP TABLE asset_watcher_cursors",
    "DROP TABLE asset_event_consumptions",
    "DROP TABLE asset_dag_queue",
    "DROP TABLE dag_asset_refs",
    "DROP TABLE asset_events",
    "DROP TABLE assets",
    "DELETE FROM dag_runs WHERE run_type = 'asset_triggered'",
    "ALTER TABLE dag_runs DROP CONSTRAINT dag_runs_run_type_check",
    "ALTER TABLE dag_runs ADD CONSTRAINT dag_runs_run_type_check "
    "CHECK (run_type IN ('manual','scheduled','backfill'))",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
