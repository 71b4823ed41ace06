"""The one table that maps domain errors to gRPC status codes, and aborting a call with it.

Failures of the backend the handlers call that mean "not reachable right now" (for the database: a
broken connection, PostgreSQL shutting down or starting, a serialization failure or deadlock to
retry) become UNAVAILABLE; a statement timeout becomes DEADLINE_EXCEEDED. The backend says which
failures are which (:class:`BackendErrors`, given by the server's owner: the store's
``schedd_store.engine.DATABASE_ERRORS``), so this module knows nothing of the database. Only a
failure that is truly unexpected is INTERNAL, and it is logged with its traceback. Status messages
are cut to ``MAX_MESSAGE_CHARS`` so they always fit gRPC's metadata limit.
"""

from __future__ import annotations

import logging
from typing import Protocol

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status  # type: ignore[import-untyped]

from schedd_core import errors as e

log = logging.getLogger(__name__)

#: ``ErrorInfo.domain`` of schedd's errors.
ERROR_DOMAIN = "schedd.dev"

#: Longest status message sent (the trailers that carry it are limited to 8 KiB by default).
MAX_MESSAGE_CHARS = 2000

#: Most specific first.
STATUS_OF: list[tuple[type[e.ScheddError], grpc.StatusCode]] = [
    (e.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (e.NotFound, grpc.StatusCode.NOT_FOUND),
    (e.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (e.FencedOut, grpc.StatusCode.FAILED_PRECONDITION),
    (e.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (e.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (e.Unavailable, grpc.StatusCode.UNAVAILABLE),
    (e.ScheddError, grpc.StatusCode.INTERNAL),
]


class BackendErrors(Protocol):
    """Which failures of the backend the handlers call (that are no domain errors) are which."""

    def is_transient(self, exc: BaseException) -> bool:
        """The backend cannot do it now; the same call may succeed later."""
        ...

    def is_timeout(self, exc: BaseException) -> bool:
        """The backend gave up on a statement that ran too long."""
        ...


def status_code_of(error: e.ScheddError) -> grpc.StatusCode:
    for kind, code in STATUS_OF:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


def status_of(exc: BaseException, method: str, backend: BackendErrors) -> tuple[grpc.StatusCode, str]:
    """The status a call that raised ``exc`` ends with, and its message."""
    if isinstance(exc, e.ScheddError):
        return status_code_of(exc), str(exc)
    if backend.is_transient(exc):
        log.warning("%s: the database cannot do it now: %s", method, exc)
        return grpc.StatusCode.UNAVAILABLE, "the metadata database is unreachable, busy or restarting; retry"
    if backend.is_timeout(exc):
        return grpc.StatusCode.DEADLINE_EXCEEDED, "the database took too long; retry"
    log.error("unexpected error in %s", method, exc_info=exc)
    return grpc.StatusCode.INTERNAL, "internal error; see the server log"


def details_of(exc: BaseException) -> list[Message]:
    """The ``google.rpc`` details a status carries: which field and why for bad input, and what
    kind of error it was (``ErrorInfo.reason``, the domain error's name) for every domain error."""
    if not isinstance(exc, e.ScheddError):
        return []
    found: list[Message] = [error_details_pb2.ErrorInfo(reason=type(exc).__name__, domain=ERROR_DOMAIN)]
    if isinstance(exc, e.InvalidArgument):
        violation = error_details_pb2.BadRequest.FieldViolation(field=exc.field, description=exc.problem)
        found.append(error_details_pb2.BadRequest(field_violations=[violation]))
    return found


async def abort_for(
    context: grpc.aio.ServicerContext, exc: BaseException, method: str, backend: BackendErrors
) -> None:
    """End the call with the status ``exc`` maps to, with its ``google.rpc`` details (re-raising an
    abort already under way)."""
    if isinstance(exc, grpc.aio.AbortError):
        raise exc
    code, message = status_of(exc, method, backend)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + " [...]"
    details = details_of(exc)
    if not details:
        await context.abort(code, message)
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        status.details.add().Pack(detail)
    rich = rpc_status.to_status(status)
    await context.abort(rich.code, rich.details, rich.trailing_metadata)
