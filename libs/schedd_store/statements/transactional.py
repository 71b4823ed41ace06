"""Statements: transactional tasks (run by the worker's Python child, on asyncpg)."""

from __future__ import annotations

# --- transactional tasks (run by the worker's Python child, on asyncpg) ---------------------------

#: Marks the attempt succeeded inside the task's own transaction, through the one function the task's
#: database role may execute (migration 0019): refused (``insufficient_privilege``) unless the secret
#: is that attempt's commit secret; false when that exact attempt (task instance, try number, attempt
#: id) is no longer running, and the caller must roll back. Positional parameters: ti id, attempt id,
#: try number, commit secret, started at, result JSON.
COMMIT_TRANSACTIONAL_ATTEMPT = "SELECT schedd_commit_attempt($1, $2::uuid, $3, $4, $5, $6::jsonb)"
