"""Dynamic task mapping: a map index in the identity of a task instance.

- ``task_instances.map_index``: which instance of a mapped task a row is (0, 1, ...), -1 for a task
  that is not mapped and for a mapped task's placeholder before it is expanded.
- ``task_instances.task_key``: ``task_id`` or ``task_id[map_index]``, generated from the two; what the
  scheduler, the api and the logs name a task instance by.
- A run holds one task instance per (task, map index) instead of one per task.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from schedd_store.migrations.steps import execute_all

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UPGRADE = [
    "ALTER TABLE task_instances ADD COLUMN map_index integer NOT NULL DEFAULT -1 CHECK (map_index >= -1)",
    "ALTER TABLE task_instances ADD COLUMN task_key text GENERATED ALWAYS AS "
    "(CASE WHEN map_index < 0 THEN task_id ELSE task_id || '[' || map_index || ']' END) STORED",
    "ALTER TABLE task_instances DROP CONSTRAINT task_instances_run_task_key",
    "ALTER TABLE task_instances ADD CONSTRAINT task_instances_run_task_key "
    "UNIQUE (run_pk, task_id, map_index)",
]

DOWNGRADE = [
    "DELETE FROM task_instances WHERE map_index > 0",
    "ALTER TABLE task_instances DROP CONSTRAINT task_instances_run_task_key",
    "ALTER TABLE task_instances DROP COLUMN task_key",
    "ALTER TABLE task_instances DROP COLUMN map_index",
    "ALTER TABLE task_instances ADD CONSTRAINT task_instances_run_task_key UNIQUE (run_pk, task_id)",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
