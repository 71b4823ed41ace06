"""The initial schema: DAGs and versions, runs, task instances and attempts, pools, workers,
the scheduler fence, and the outbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from schedd_store.migrations.steps import execute_all, split_script

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TASK_STATES = (
    "'none','scheduled','queued','running','success','failed','skipped','upstream_failed',"
    "'up_for_retry','removed'"
)
RUN_STATES = "'queued','running','success','failed'"

UPGRADE = f"""
CREATE TABLE scheduler_fence (
    id          smallint PRIMARY KEY CHECK (id = 1),
    token       bigint NOT NULL,
    holder      text NOT NULL,
    raised_at   timestamptz NOT NULL DEFAULT now()
);
INSERT INTO scheduler_fence (id, token, holder) VALUES (1, 0, '');

CREATE TABLE pools (
    name        text PRIMARY KEY,
    slots       integer NOT NULL CHECK (slots >= 0),
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pools (name, slots, description)
    VALUES ('default_pool', 128, 'The pool of tasks that name none.');

CREATE TABLE dags (
    dag_id              text PRIMARY KEY,
    paused              boolean NOT NULL DEFAULT false,
    latest_version_id   bigint,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dag_versions (
    id              bigserial PRIMARY KEY,
    dag_id          text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,
    version_hash    text NOT NULL,
    spec            bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dag_versions_dag_hash_key UNIQUE (dag_id, version_hash)
);
ALTER TABLE dags ADD CONSTRAINT dags_latest_version_fkey
    FOREIGN KEY (latest_version_id) REFERENCES dag_versions (id) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE dag_runs (
    id              bigserial PRIMARY KEY,
    dag_id          text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,
    run_id          text NOT NULL,
    dag_version_id  bigint NOT NULL REFERENCES dag_versions (id),
    run_type        text NOT NULL CHECK (run_type IN ('manual','scheduled','backfill')),
    state           text NOT NULL CHECK (state IN ({RUN_STATES})),
    logical_date    timestamptz NOT NULL,
    conf            jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    request_id      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    ended_at        timestamptz,
    -- the fencing token of the scheduler term that last changed the run
    fence_token     bigint NOT NULL DEFAULT 0,
    CONSTRAINT dag_runs_dag_run_id_key UNIQUE (dag_id, run_id),
    CONSTRAINT dag_runs_request_id_key UNIQUE (dag_id, request_id)
);
-- A scheduled (or backfilled) run is identified by its DAG and logical date alone.
CREATE UNIQUE INDEX dag_runs_dag_logical_date_key ON dag_runs (dag_id, logical_date)
    WHERE run_type IN ('scheduled', 'backfill');
CREATE INDEX dag_runs_unfinished_idx ON dag_runs (dag_id, state) WHERE state IN ('queued', 'running');

CREATE TABLE task_instances (
    id              bigserial PRIMARY KEY,
    run_pk          bigint NOT NULL REFERENCES dag_runs (id) ON DELETE CASCADE,
    task_id         text NOT NULL,
    state           text NOT NULL CHECK (state IN ({TASK_STATES})),
    try_number      integer NOT NULL DEFAULT 0,
    max_tries       integer NOT NULL DEFAULT 1,
    attempt_id      uuid,
    priority_weight integer NOT NULL DEFAULT 1,
    pool            text NOT NULL DEFAULT 'default_pool',
    pool_slots      integer NOT NULL DEFAULT 1,
    queue           text NOT NULL DEFAULT 'default',
    worker_id       text,
    queued_at       timestamptz,
    started_at      timestamptz,
    ended_at        timestamptz,
    heartbeat_at    timestamptz,
    next_retry_at   timestamptz,
    exit_code       integer,
    error           text,
    -- the fencing token of the scheduler term that last changed the task instance
    fence_token     bigint NOT NULL DEFAULT 0,
    CONSTRAINT task_instances_run_task_key UNIQUE (run_pk, task_id)
);
CREATE INDEX task_instances_claim_idx ON task_instances (queue, priority_weight DESC, queued_at, id)
    WHERE state = 'queued';
CREATE INDEX task_instances_active_idx ON task_instances (state)
    WHERE state IN ('running', 'up_for_retry', 'scheduled');

-- One row per attempt: who ran it, from when to when, and how it ended.
CREATE TABLE task_attempts (
    attempt_id      uuid PRIMARY KEY,
    ti_id           bigint NOT NULL REFERENCES task_instances (id) ON DELETE CASCADE,
    try_number      integer NOT NULL,
    worker_id       text NOT NULL,
    state           text NOT NULL CHECK (state IN ('running','success','failed')),
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    ended_at        timestamptz,
    exit_code       integer,
    error           text
);
CREATE INDEX task_attempts_ti_idx ON task_attempts (ti_id);

CREATE TABLE workers (
    worker_id       text PRIMARY KEY,
    hostname        text NOT NULL DEFAULT '',
    queues          text[] NOT NULL DEFAULT '{{}}',
    capacity        integer NOT NULL CHECK (capacity > 0),
    code_version    text NOT NULL DEFAULT '',
    state           text NOT NULL CHECK (state IN ('active','draining','gone')),
    registry        text NOT NULL DEFAULT '',
    registered_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now()
);

-- Events that must reach the outside, written in the same transaction as the change they report.
CREATE TABLE outbox (
    id              bigserial PRIMARY KEY,
    topic           text NOT NULL,
    payload         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    attempts        integer NOT NULL DEFAULT 0
);
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE delivered_at IS NULL;
"""

DOWNGRADE = """
DROP TABLE outbox, workers, task_attempts, task_instances, dag_runs CASCADE;
ALTER TABLE dags DROP CONSTRAINT dags_latest_version_fkey;
DROP TABLE dag_versions, dags, pools, scheduler_fence CASCADE;
"""


def upgrade() -> None:
    execute_all(split_script(UPGRADE))


def downgrade() -> None:
    execute_all(split_script(DOWNGRADE))
