"""``SCHEDD_LOG_FORMAT=json``: one JSON object per line with the ids known where it was logged."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from schedd_telemetry.logs import JsonFormatter, bound, configure_logging, log_format


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("schedd.test.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_has_time_level_logger_and_message_and_nothing_unknown(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.warning("worker %s connected", "w1")
    (line,) = _lines(stream)
    assert set(line) == {"time", "level", "logger", "message"}
    assert line["level"] == "WARNING" and line["logger"] == "schedd.test.json"
    assert line["message"] == "worker w1 connected"
    assert str(line["time"]).endswith("+00:00")


def test_bound_ids_and_extra_ids_are_written_and_bound_ones_reach_tasks_created_inside(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured

    async def attempt() -> None:
        await asyncio.sleep(0)
        logger.info("running")

    async def main() -> None:
        with bound(dag_id="etl", run_id="r1", task_id="load", try_number=2, attempt_id="a-1"):
            task = asyncio.create_task(attempt())
        logger.info("outside", extra={"dag_id": "other"})
        await task

    asyncio.run(main())
    outside, inside = _lines(stream)
    assert inside["message"] == "running"
    assert {k: inside[k] for k in ("dag_id", "run_id", "task_id", "try_number", "attempt_id")} == {
        "dag_id": "etl",
        "run_id": "r1",
        "task_id": "load",
        "try_number": 2,
        "attempt_id": "a-1",
    }
    assert outside["dag_id"] == "other" and "run_id" not in outside


def test_trace_and_span_ids_while_a_span_is_current(captured: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = captured
    span = TracerProvider().get_tracer("test").start_span("attempt")
    with trace.use_span(span, end_on_exit=True):
        logger.info("traced")
    logger.info("untraced")
    traced, untraced = _lines(stream)
    context = span.get_span_context()
    assert traced["trace_id"] == format(context.trace_id, "032x")
    assert traced["span_id"] == format(context.span_id, "016x")
    assert "trace_id" not in untraced


def test_exceptions_are_one_field_of_one_line(captured: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = captured
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        logger.exception("failed")
    (line,) = _lines(stream)
    assert "RuntimeError: boom" in str(line["exception"])
    assert stream.getvalue().count("\n") == 1


def test_unknown_fields_cannot_be_bound() -> None:
    with pytest.raises(ValueError, match="unknown log fields"), bound(user="x"):
        pass


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "text"), ({"SCHEDD_LOG_FORMAT": "json"}, "json"), ({"SCHEDD_LOG_FORMAT": " JSON "}, "json")],
)
def test_the_format_comes_from_the_environment(env: dict[str, str], expected: str) -> None:
    assert log_format(env) == expected


def test_a_bad_format_is_refused() -> None:
    with pytest.raises(ValueError, match="SCHEDD_LOG_FORMAT"):
        configure_logging("INFO", {"SCHEDD_LOG_FORMAT": "xml"})
