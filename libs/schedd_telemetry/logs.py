"""Log lines as text (the default) or, with ``SCHEDD_LOG_FORMAT=json``, one JSON object a line.

A JSON line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``, ``exception``
when one is logged, and whichever of ``dag_id``, ``run_id``, ``task_id``, ``try_number`` and
``attempt_id`` are known: bound for the code that runs under :func:`bound` (a worker binds them
for each attempt it runs) or given as ``extra=`` of one call. ``trace_id`` and ``span_id`` (hex)
are added while a recording span is current. Nothing else of a record is written.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from opentelemetry import trace

#: The ids a JSON line may carry, in the order they are written.
FIELDS = ("dag_id", "run_id", "task_id", "try_number", "attempt_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")

_NONE: Mapping[str, Any] = MappingProxyType({})
_bound: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("schedd_log_fields", default=_NONE)


@contextlib.contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (of :data:`FIELDS`) to every JSON line logged in this context, including by
    asyncio tasks created inside it (they copy the context)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown log fields: {sorted(unknown)}")
    token = _bound.set({**_bound.get(), **fields})
    try:
        yield
    finally:
        _bound.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = _bound.get()
        for name in FIELDS:
            value = getattr(record, name, fields.get(name))
            if value is not None and value != "":
                line[name] = value
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = format(span.trace_id, "032x")
            line["span_id"] = format(span.span_id, "016x")
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, default=str)


def log_format(env: Mapping[str, str] | None = None) -> str:
    """``SCHEDD_LOG_FORMAT``: ``text`` (the default) or ``json``; ValueError for anything else."""
    value = (os.environ if env is None else env).get("SCHEDD_LOG_FORMAT", "text").strip().lower() or "text"
    if value not in FORMATS:
        raise ValueError(f"SCHEDD_LOG_FORMAT must be 'text' or 'json', not {value!r}")
    return value


def configure_logging(level: str, env: Mapping[str, str] | None = None) -> None:
    """Set up the root logger at ``level`` in the format ``SCHEDD_LOG_FORMAT`` asks for, on stderr."""
    if log_format(env) == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level, handlers=[handler], force=True)
    else:
        logging.basicConfig(level=level, format=TEXT_FORMAT)
