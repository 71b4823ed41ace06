"""Worker identity: reports bound to the worker holding the attempt, tokens limited to queues, enrollment.

- ``api_tokens.queues``: the queues a worker or enrollment token may subscribe to (empty: any);
- ``api_tokens.max_uses`` / ``uses``: how many workers an enrollment token (role ``enroll``) may
  enroll (NULL: any number) and how many it did;
- role ``enroll``: a token that can only enroll workers (``WorkerRegistry.Enroll``);
- ``task_attempts.log_bytes``: the bytes of output stored for the attempt, counted by the server,
  which enforces the per-attempt cap with it (existing attempts are counted from ``task_logs``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

from schedd_store.migrations.steps import execute_all

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

UPGRADE: list[str] = [
    "ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check",
    "ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check "
    "CHECK (role IN ('viewer', 'operator', 'admin', 'worker', 'enroll'))",
    "ALTER TABLE api_tokens ADD COLUMN queues text[] NOT NULL DEFAULT '{}'",
    "ALTER TABLE api_tokens ADD COLUMN max_uses integer CHECK (max_uses > 0)",
    "ALTER TABLE api_tokens ADD COLUMN uses integer NOT NULL DEFAULT 0",
    "ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_queues_role_check "
    "CHECK (cardinality(queues) = 0 OR role IN ('worker', 'enroll'))",
    "ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_max_uses_role_check "
    "CHECK (max_uses IS NULL OR role = 'enroll')",
    "CREATE INDEX api_tokens_worker_idx ON api_tokens (worker_id) WHERE worker_id IS NOT NULL",
    "ALTER TABLE task_attempts ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0",
    "UPDATE task_attempts a SET log_bytes = l.bytes FROM ("
    " SELECT attempt_id, sum(octet_length(data)) AS bytes FROM task_logs GROUP BY attempt_id) l "
    "WHERE a.attempt_id = l.attempt_id",
]

#: A token limited to queues is revoked rather than widened to every queue.
DOWNGRADE: list[str] = [
    "ALTER TABLE task_attempts DROP COLUMN log_bytes",
    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE cardinality(queues) > 0",
    "DROP INDEX api_tokens_worker_idx",
    "DELETE FROM api_tokens WHERE role = 'enroll'",
    "ALTER TABLE api_tokens DROP COLUMN uses",
    "ALTER TABLE api_tokens DROP COLUMN max_uses",
    "ALTER TABLE api_tokens DROP COLUMN queues",
    "ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check",
    "ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check "
    "CHECK (role IN ('viewer', 'operator', 'admin', 'worker'))",
]


def upgrade() -> None:
    execute_all(UPGRADE)


def downgrade() -> None:
    execute_all(DOWNGRADE)
