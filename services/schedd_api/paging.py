"""Pages of list calls: the page size a request may ask for, keyset page tokens, and pages that
stay under the size a default gRPC client accepts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from google.protobuf.message import Message

from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_PAGE_BYTES, MAX_PAGE_SIZE
from schedd_store.records import RunRecord
from schedd_store.runs import RunCursor

DEFAULT_PAGE_SIZE = 50

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

T = TypeVar("T")
M = TypeVar("M", bound=Message)


def page_size(value: int) -> int:
    if value < 0:
        raise InvalidArgument("page_size", "must not be negative")
    return min(value or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def page(records: list[T], limit: int, translate_one: Callable[[T], M]) -> tuple[list[M], bool]:
    """The messages of one page (at most ``limit`` of ``records``, ``limit + 1`` of which were read, and
    at most ``MAX_PAGE_BYTES``), and whether more remain after the last one shown."""
    items: list[M] = []
    size = 0
    for record in records[:limit]:
        item = translate_one(record)
        size += item.ByteSize()
        if items and size > MAX_PAGE_BYTES:
            return items, True
        items.append(item)
    return items, len(records) > limit


def keyset_token(token: str) -> int:
    """The id a keyset page starts below; an empty token starts at the newest."""
    if not token:
        return 2**62
    if not (token.isascii() and token.isdigit()) or len(token) > 18:
        raise InvalidArgument("page_token", "is not a token this server issued")
    return int(token)


def run_cursor(token: str, order: str) -> RunCursor | None:
    """Where a page of runs in ``order`` starts, from a token :func:`run_token` made for that order."""
    if not token:
        return None
    if not order.startswith("logical_date"):
        return RunCursor(pk=keyset_token(token))
    pk, sep, micros = token.partition(".")
    digits = micros.removeprefix("-")
    if not sep or not digits.isascii() or not digits.isdigit() or len(digits) > 18:
        raise InvalidArgument("page_token", f"is not a token this server issued for order_by {order!r}")
    return RunCursor(pk=keyset_token(pk), logical_date=_EPOCH + timedelta(microseconds=int(micros)))


def run_token(record: RunRecord, order: str) -> str:
    """The token of the page after ``record`` in ``order``."""
    if not order.startswith("logical_date"):
        return str(record.pk)
    micros = (record.logical_date - _EPOCH) // timedelta(microseconds=1)
    return f"{record.pk}.{micros}"
