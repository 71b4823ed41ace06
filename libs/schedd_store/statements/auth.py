"""Statements: bearer tokens and the audit log."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- tokens ----------------------------------------------------------------------------------------

_TOKEN_FIELDS = "token_id, name, role, worker_id, created_at, created_by, expires_at, revoked_at"

#: Fails on a taken name (the unique index) or, rarely, a taken token id; the caller retries the latter.
INSERT_TOKEN = _sql(
    "INSERT INTO api_tokens (token_id, name, secret_sha256, role, worker_id, created_by, expires_at) "
    "VALUES (:token_id, :name, :secret_sha256, :role, :worker_id, :created_by, :expires_at) "
    f"RETURNING {_TOKEN_FIELDS}"
)

#: One token by its public id, with whether it has expired by the database's clock.
TOKEN_BY_ID = _sql(
    f"SELECT {_TOKEN_FIELDS}, secret_sha256, expires_at IS NOT NULL AND expires_at <= now() AS expired "
    "FROM api_tokens WHERE token_id = :token_id"
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

# --- audit -----------------------------------------------------------------------------------------

INSERT_AUDIT_RECORD = _sql(
    "INSERT INTO audit_log (principal, role, method, resource, request_id, code, detail, peer) "
    "VALUES (:principal, :role, :method, :resource, :request_id, :code, :detail, :peer)"
)

#: Newest first, below the id :before; each filter applies when given.
LIST_AUDIT_RECORDS = _sql(
    "SELECT id, at, principal, role, method, resource, request_id, code, detail, peer FROM audit_log "
    "WHERE id < :before AND (:principal = '' OR principal = :principal) "
    "AND (:method = '' OR strpos(method, :method) > 0) AND (:code = '' OR code = :code) "
    "AND (CAST(:since AS timestamptz) IS NULL OR at >= CAST(:since AS timestamptz)) "
    "ORDER BY id DESC LIMIT :limit"
)
