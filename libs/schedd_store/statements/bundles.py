"""Statements: code bundles (content-addressed archives)."""

from __future__ import annotations

from schedd_store.statements.guards import _sql

# --- code bundles ----------------------------------------------------------------------------------

#: Stores an archive under its hash; returns a row only when it was not stored yet.
INSERT_BUNDLE = _sql(
    "INSERT INTO code_bundles (sha256, archive, size_bytes) VALUES (:sha256, :archive, :size_bytes) "
    "ON CONFLICT (sha256) DO NOTHING RETURNING sha256"
)

BUNDLE_SIZE = _sql("SELECT size_bytes FROM code_bundles WHERE sha256 = :sha256")

#: A piece of an archive: ``:length`` bytes from byte ``:offset`` (0-based).
READ_BUNDLE_PIECE = _sql(
    "SELECT substring(archive FROM CAST(:offset AS int) + 1 FOR CAST(:length AS int)) AS data "
    "FROM code_bundles WHERE sha256 = :sha256"
)
