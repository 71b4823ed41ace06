"""Making the idempotency key (``schedd_core.request_key``) of a mutating request."""

from __future__ import annotations

import hashlib

from google.protobuf.message import Message

from schedd_core.request_key import RequestKey


def request_key(request: Message) -> RequestKey | None:
    """None when the request carries no ``request_id``; else the id and the SHA-256 of the request's
    deterministic serialization without it (two requests with the same id must be the same)."""
    request_id = getattr(request, "request_id", "")
    if not request_id:
        return None
    body = type(request)()
    body.CopyFrom(request)
    body.ClearField("request_id")
    return RequestKey(request_id, hashlib.sha256(body.SerializeToString(deterministic=True)).hexdigest())
