"""The idempotency key of a mutating request: its ``request_id`` and a hash of everything else in it.

Made from a request by ``schedd_rpc.request_keys``; the store records it (``schedd_store.requests``)
so that a retried request does nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestKey:
    """A request id and the hash of the body it came with."""

    request_id: str
    body_hash: str
