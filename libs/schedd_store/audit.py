"""The audit log: insert-only rows, one per audited call or refused call, or one standing for
``count`` refused calls of one kind (``schedd_rpc.refused_calls``)."""

from __future__ import annotations

from datetime import datetime

from schedd_auth.audit import AuditRecord
from schedd_store import statements as sql
from schedd_store.database import Engine

#: Longest text kept per field (a detail is an error message, which the api already bounds).
MAX_FIELD_CHARS = 500


async def record(engine: Engine, entry: AuditRecord) -> None:
    """Store one audit row; it is committed when this returns."""
    params = {
        "principal": entry.principal,
        "role": entry.role,
        "method": entry.method,
        "resource": entry.resource,
        "request_id": entry.request_id,
        "code": entry.code,
        "detail": entry.detail,
        "peer": entry.peer,
    }
    texts = {k: v.replace("\x00", "")[:MAX_FIELD_CHARS] for k, v in params.items()}
    # One statement, so its own implicit transaction: stored (committed) when this returns, at one
    # round trip instead of BEGIN, INSERT, COMMIT.
    async with engine.autocommit() as conn:
        await conn.execute(sql.INSERT_AUDIT_RECORD, {**texts, "count": max(1, entry.count)})


async def list_records(
    engine: Engine,
    *,
    before: int,
    limit: int,
    principal: str = "",
    method: str = "",
    code: str = "",
    since: datetime | None = None,
) -> list[AuditRecord]:
    params = {
        "before": before,
        "limit": limit,
        "principal": principal,
        "method": method,
        "code": code,
        "since": since,
    }
    async with engine.connect() as conn:
        rows = (await conn.execute(sql.LIST_AUDIT_RECORDS, params)).all()
    return [
        AuditRecord(
            id=r.id,
            at=r.at,
            principal=r.principal,
            role=r.role,
            method=r.method,
            resource=r.resource,
            request_id=r.request_id,
            code=r.code,
            detail=r.detail,
            peer=r.peer,
            count=r._mapping["count"],  # not r.count: a row is a tuple, and that is its method
        )
        for r in rows
    ]
