"""The one table that maps domain errors to gRPC status codes, and aborting a call with it.

Database errors that mean "not reachable right now" (a broken connection, PostgreSQL shutting down
or starting, a serialization failure or deadlock to retry) become UNAVAILABLE; a statement timeout
becomes DEADLINE_EXCEEDED. Only a failure that is truly unexpected is INTERNAL, and it is logged
with its traceback. Status messages are cut to ``MAX_MESSAGE_CHARS`` so they always fit gRPC's
metadata limit.
"""

from __future__ import annotations

import logging

import grpc
from sqlalchemy.exc import DBAPIError, InterfaceError

from schedd_core import errors as e

log = logging.getLogger(__name__)

#: Longest status message sent (the trailers that carry it are limited to 8 KiB by default).
MAX_MESSAGE_CHARS = 2000

#: Most specific first.
STATUS_OF: list[tuple[type[e.ScheddError], grpc.StatusCode]] = [
    (e.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (e.NotFound, grpc.StatusCode.NOT_FOUND),
    (e.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (e.FencedOut, grpc.StatusCode.FAILED_PRECONDITION),
    (e.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (e.Unavailable, grpc.StatusCode.UNAVAILABLE),
    (e.ScheddError, grpc.StatusCode.INTERNAL),
]

#: SQLSTATE classes and codes that say "try again".
_RETRYABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "40001", "40P01", "53300")
_STATEMENT_TIMEOUT = "57014"


def status_code_of(error: e.ScheddError) -> grpc.StatusCode:
    for kind, code in STATUS_OF:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


def status_of(exc: BaseException, method: str) -> tuple[grpc.StatusCode, str]:
    """The status a call that raised ``exc`` ends with, and its message."""
    if isinstance(exc, e.ScheddError):
        return status_code_of(exc), str(exc)
    broken = isinstance(exc, DBAPIError) and exc.connection_invalidated
    if isinstance(exc, OSError | InterfaceError) or broken:
        log.warning("%s: the database cannot be reached: %s", method, exc)
        return grpc.StatusCode.UNAVAILABLE, "the metadata database cannot be reached; retry"
    if isinstance(exc, DBAPIError):
        sqlstate = str(getattr(exc.orig, "sqlstate", "") or "")
        if sqlstate == _STATEMENT_TIMEOUT:
            return grpc.StatusCode.DEADLINE_EXCEEDED, "the database took too long; retry"
        if sqlstate.startswith(_RETRYABLE_SQLSTATES):
            log.warning("%s: retryable database error %s: %s", method, sqlstate, exc)
            return grpc.StatusCode.UNAVAILABLE, "the metadata database is busy or restarting; retry"
    log.error("unexpected error in %s", method, exc_info=exc)
    return grpc.StatusCode.INTERNAL, "internal error; see the server log"


async def abort_for(context: grpc.aio.ServicerContext, exc: BaseException, method: str) -> None:
    """End the call with the status ``exc`` maps to (re-raising an abort already under way)."""
    if isinstance(exc, grpc.aio.AbortError):
        raise exc
    code, message = status_of(exc, method)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + " [...]"
    await context.abort(code, message)
