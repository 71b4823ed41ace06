"""The one table that maps domain errors to gRPC status codes, in both directions."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from sqlalchemy.exc import DBAPIError, InterfaceError

from schedd_core import errors as e

log = logging.getLogger(__name__)

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


def status_code_of(error: e.ScheddError) -> grpc.StatusCode:
    for kind, code in STATUS_OF:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


R = TypeVar("R")


def translate_errors(
    method: Callable[..., Awaitable[R]],
) -> Callable[..., Awaitable[R]]:
    """Decorator for unary servicer methods: a domain error aborts the call with its status code
    and message; anything else is logged and aborts with INTERNAL."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            return await method(self, request, context)
        except e.ScheddError as exc:
            await context.abort(status_code_of(exc), str(exc))
        except grpc.aio.AbortError:
            raise
        except (OSError, InterfaceError) as exc:
            log.warning("%s: the database cannot be reached: %s", method.__name__, exc)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the metadata database cannot be reached; retry")
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                log.exception("unexpected database error in %s", method.__name__)
                await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the server log")
            log.warning("%s: the database connection broke: %s", method.__name__, exc)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the metadata database cannot be reached; retry")
        except Exception:
            log.exception("unexpected error in %s", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the server log")
        raise AssertionError("unreachable")

    return wrapper
