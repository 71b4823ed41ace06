"""Domain errors of schedd. Every library raises these; the rpc layer maps them to gRPC codes."""

from __future__ import annotations

#: The most characters of a bad value an error message quotes.
QUOTE_CHARS = 60


def quote(value: str) -> str:
    """``repr`` of ``value`` for an error message, cut to ``QUOTE_CHARS`` characters (length said)."""
    if len(value) <= QUOTE_CHARS:
        return repr(value)
    return f"{value[:QUOTE_CHARS]!r}... ({len(value)} characters)"


class ScheddError(Exception):
    """Root of every error schedd raises on purpose."""


class InvalidArgument(ScheddError):
    """A request or spec is malformed. ``field`` names the offending field path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class NotFound(ScheddError):
    """A named resource does not exist."""


class AlreadyExists(ScheddError):
    """A resource with that identity exists already."""


class FailedPrecondition(ScheddError):
    """The system is not in a state where the operation can be applied."""


class IllegalTransition(FailedPrecondition):
    """A state change was not allowed from the row's current state (zero rows matched the guard)."""


class FencedOut(ScheddError):
    """A scheduler write carried a fencing token lower than the one in PostgreSQL.

    The writer is no longer the leader; nothing it tried to write was committed.
    """

    def __init__(self, token: int, current: int) -> None:
        super().__init__(f"fencing token {token} is stale; the fence stands at {current}")
        self.token = token
        self.current = current


class LeaseExpired(ScheddError):
    """A scheduler's lease could no longer be trusted when it was about to commit (fail-stop).

    Nothing of the transaction was committed; the term is over.
    """


class PermissionDenied(ScheddError):
    """The caller is authenticated but may not do this (its role, or a worker id its token is not
    bound to)."""


class Unavailable(ScheddError):
    """A dependency (etcd, PostgreSQL, a peer service) cannot be reached right now."""
