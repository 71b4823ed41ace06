"""Who is making the current call: set by the auth interceptor for the duration of a handler, read
by servicers that need it (a registry checks a worker's id against its token's)."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from schedd_auth.roles import SECRETS


@dataclass(frozen=True)
class Principal:
    #: The token's name; ``anonymous`` when authentication is disabled.
    name: str
    role: str
    #: For a worker token bound to one worker: the only worker id it may connect as.
    worker_id: str | None = None
    #: For a worker token limited to queues: the only queues it may subscribe to (empty: any).
    queues: tuple[str, ...] = ()
    #: The token's public id (empty when authentication is disabled).
    token_id: str = ""


#: The principal of every call while authentication is disabled (development only).
ANONYMOUS = Principal("anonymous", SECRETS)

_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("schedd_principal", default=None)


def current() -> Principal | None:
    """The principal of the call being handled (None outside a call)."""
    return _current.get()


def bind(principal: Principal) -> contextvars.Token[Principal | None]:
    return _current.set(principal)


def unbind(token: contextvars.Token[Principal | None]) -> None:
    _current.reset(token)
