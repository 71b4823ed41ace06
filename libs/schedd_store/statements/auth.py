"""Statements: bearer tokens and the audit log."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- tokens ----------------------------------------------------------------------------------------

_TOKEN_FIELDS = (
    "token_id, name, role, worker_id, created_at, created_by, expires_at, revoked_at, queues, max_uses, uses"
)

#: Fails on a taken name (the unique index) or, rarely, a taken token id; the caller retries the latter.
INSERT_TOKEN = _sql(
    "INSERT INTO api_tokens (token_id, name, secret_sha256, role, worker_id, created_by, expires_at, "
    "queues, max_uses) VALUES (:token_id, :name, :secret_sha256, :role, :worker_id, :created_by, "
    ":expires_at, CAST(:queues AS text[]), :max_uses) "
    f"RETURNING {_TOKEN_FIELDS}"
)

#: One token by its public id, with whether it has expired by the database's clock and whether an
#: enrollment token has enrolled as many workers as it may.
TOKEN_BY_ID = _sql(
    f"SELECT {_TOKEN_FIELDS}, secret_sha256, expires_at IS NOT NULL AND expires_at <= now() AS expired, "
    "max_uses IS NOT NULL AND uses >= max_uses AS used_up "
    "FROM api_tokens WHERE token_id = :token_id"
)

# --- enrollment ------------------------------------------------------------------------------------

#: Serialises enrollments of one worker id (held until the transaction ends).
LOCK_WORKER_ID = _sql("SELECT pg_advisory_xact_lock(hashtextextended('schedd.worker_id:' || :worker_id, 0))")

#: A usable token (neither revoked nor expired) bound to the worker id, if any (its name).
LIVE_TOKEN_OF_WORKER = _sql(
    "SELECT name FROM api_tokens WHERE worker_id = :worker_id AND revoked_at IS NULL "
    "AND (expires_at IS NULL OR expires_at > now()) LIMIT 1"
)

#: Spends one use of an enrollment token, only while it is usable (not revoked, not expired, not used
#: up; checked in this statement, so concurrent enrollments never exceed max_uses). No row: refused.
SPEND_ENROLLMENT = _sql(
    "UPDATE api_tokens SET uses = uses + 1 WHERE token_id = :token_id AND role = 'enroll' "
    "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) "
    "AND (max_uses IS NULL OR uses < max_uses) RETURNING name, queues"
)

LIST_TOKENS = _sql(
    f"SELECT {_TOKEN_FIELDS} FROM api_tokens WHERE name > :after "
    "AND (:include_revoked OR revoked_at IS NULL) ORDER BY name LIMIT :limit"
)

#: Revoking a revoked token keeps its first revocation time.
REVOKE_TOKEN = _sql(
    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE name = :name "
    f"RETURNING {_TOKEN_FIELDS}"
)

#: Serialises the start-up of api replicas storing a bootstrap token (held to the transaction's end).
LOCK_BOOTSTRAP_TOKEN = _sql("SELECT pg_advisory_xact_lock(hashtext('schedd.bootstrap-token'))")

TOKEN_BY_NAME = _sql("SELECT token_id, name, secret_sha256 FROM api_tokens WHERE name = :name")

#: The bootstrap token: an admin token of no expiry, every other column at its default.
INSERT_BOOTSTRAP_TOKEN = _sql(
    "INSERT INTO api_tokens (token_id, name, secret_sha256, role, created_by) "
    "VALUES (:token_id, :name, :secret_sha256, 'admin', 'bootstrap')"
)

#: A replaced bootstrap token: revoked (keeping an earlier revocation time) and renamed out of the way.
RETIRE_TOKEN = _sql(
    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now()), name = :retired_name "
    "WHERE token_id = :token_id"
)

# --- audit -----------------------------------------------------------------------------------------

INSERT_AUDIT_RECORD = _sql(
    "INSERT INTO audit_log (principal, role, method, resource, request_id, code, detail, peer, count) "
    "VALUES (:principal, :role, :method, :resource, :request_id, :code, :detail, :peer, :count)"
)

#: Newest first, below the id :before; each filter applies when given.
LIST_AUDIT_RECORDS = _sql(
    "SELECT id, at, principal, role, method, resource, request_id, code, detail, peer, count "
    "FROM audit_log "
    "WHERE id < :before AND (:principal = '' OR principal = :principal) "
    "AND (:method = '' OR strpos(method, :method) > 0) AND (:code = '' OR code = :code) "
    "AND (CAST(:since AS timestamptz) IS NULL OR at >= CAST(:since AS timestamptz)) "
    "ORDER BY id DESC LIMIT :limit"
)
