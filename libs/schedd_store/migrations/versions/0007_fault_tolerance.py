"""Fault tolerance: bounded passes, heartbeats per worker with the timing each worker was granted.

- ``dag_versions.task_count``: lets a scheduling pass budget the task instances it plans.
- ``workers.heartbeat_at``: when the registry last recorded a heartbeat of the worker (one row per
  heartbeat instead of one per running attempt); ``fence_window`` and ``silence_limit``: how long
  after that the worker may still be running attempts (without, and with, an etcd lease), as its
  registry granted them. The leader fails attempts over only after those windows.
- ``task_instances.heartbeat_at`` becomes ``claimed_at`` (when the current attempt was claimed; no
  longer touched by heartbeats), and ``lost_reported`` marks an attempt its worker said it does not
  run (handed back, or missing from a reconnecting worker's list): failed over at once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from alembic import op
from sqlalchemy import text

from schedd.v1 import resources_pb2 as pb
from schedd_store.migrations.steps import execute_all

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UPGRADE = [
    "ALTER TABLE dag_versions ADD COLUMN task_count integer NOT NULL DEFAULT 0",
    "ALTER TABLE workers ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now()",
    "ALTER TABLE workers ADD COLUMN fence_window double precision NOT NULL DEFAULT 30",
    "ALTER TABLE workers ADD COLUMN silence_limit double precision NOT NULL DEFAULT 30",
    "ALTER TABLE task_instances RENAME COLUMN heartbeat_at TO claimed_at",
    "ALTER TABLE task_instances ADD COLUMN lost_reported boolean NOT NULL DEFAULT false",
]

DOWNGRADE = [
    "ALTER TABLE task_instances DROP COLUMN lost_reported",
    "ALTER TABLE task_instances RENAME COLUMN claimed_at TO heartbeat_at",
    "ALTER TABLE workers DROP COLUMN silence_limit",
    "ALTER TABLE workers DROP COLUMN fence_window",
    "ALTER TABLE workers DROP COLUMN heartbeat_at",
    "ALTER TABLE dag_versions DROP COLUMN task_count",
]


def upgrade() -> None:
    execute_all(UPGRADE)
    bind = op.get_bind()
    for version_id, data in bind.execute(text("SELECT id, spec FROM dag_versions")).all():
        spec = pb.DagSpec()
        spec.ParseFromString(data)
        bind.execute(
            text("UPDATE dag_versions SET task_count = :n WHERE id = :id"),
            {"n": len(spec.tasks), "id": version_id},
        )


def downgrade() -> None:
    execute_all(DOWNGRADE)
