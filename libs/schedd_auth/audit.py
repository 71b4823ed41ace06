"""One entry of the audit log: who called what, on which resource, and how the call ended.

A plain record: the access interceptor (``schedd_rpc.access``) makes them, the store
(``schedd_store.audit``) writes and reads them. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class AuditRecord:
    principal: str
    role: str
    method: str
    code: str
    resource: str = ""
    request_id: str = ""
    detail: str = ""
    peer: str = ""
    #: How many calls the row stands for: 1, or more for a window of repeated refusals.
    count: int = 1
    id: int = 0
    at: datetime | None = None
