"""Statements: idempotent requests."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- idempotent requests ---------------------------------------------------------------------------

#: Records a request id; zero rows: it was recorded before (see FIND_REQUEST). A concurrent insert of
#: the same key waits for the other transaction.
CLAIM_REQUEST = _sql(
    "INSERT INTO request_log (method, request_id, body_hash, resource) "
    "VALUES (:method, :request_id, :body_hash, '') ON CONFLICT (method, request_id) DO NOTHING RETURNING 1"
)

FIND_REQUEST = _sql(
    "SELECT body_hash, resource FROM request_log WHERE method = :method AND request_id = :request_id"
)

RECORD_REQUEST_RESOURCE = _sql(
    "UPDATE request_log SET resource = :resource WHERE method = :method AND request_id = :request_id"
)
