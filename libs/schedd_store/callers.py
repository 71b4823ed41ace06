"""What the access interceptor (``schedd_rpc.access``) needs of the database: who a token is, and
where refused and audited calls are written. The servers' owners give it :class:`StoredCallers`."""

from __future__ import annotations

from schedd_auth.audit import AuditRecord
from schedd_auth.principal import Principal
from schedd_auth.tokens import Token
from schedd_store import audit, tokens
from schedd_store.database import Engine
from schedd_store.engine import is_transient


class StoredCallers:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def principal_of(self, token: Token) -> Principal | str:
        """The principal of ``token``, or why it is refused (unknown, revoked, expired, used up)."""
        found = await tokens.authenticate(self._engine, token)
        if found.record is None:
            return found.refusal
        record = found.record
        return Principal(record.name, record.role, record.worker_id, record.queues, record.token_id)

    async def record(self, entry: AuditRecord) -> None:
        """Write one audit row."""
        await audit.record(self._engine, entry)

    def is_transient(self, exc: BaseException) -> bool:
        """Whether a failure of the calls above means the database cannot answer now."""
        return is_transient(exc)
