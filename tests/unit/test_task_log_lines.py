"""The lines of a task's log: stamped once each with the time they were read, however the output
is cut; stamps taken off again; UTF-8 offsets, the cap and the failure at the end of an attempt's
log; a Python task's output passed on while it runs; a shell killed by a signal says so."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from schedd.v1 import worker_pb2
from schedd_core.limits import MAX_LOG_PIECE_CHARS
from schedd_core.log_lines import STAMP_WIDTH, LineStamper, StampRemover, stamp
from schedd_exec.attempt_log import NOTE_RESERVE, AttemptLogs
from schedd_exec.outcome import Outcome
from schedd_exec.python_pool import PythonPool
from schedd_exec.shell import run_shell

STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
T0 = datetime(2026, 12, 3, 13, 14, 51, 123456, tzinfo=UTC)


def ticking() -> Iterator[datetime]:
    """A clock one second later at each reading."""
    moment = T0
    while True:
        yield moment
        moment += timedelta(seconds=1)


def test_a_stamp_is_utc_iso_8601_with_milliseconds() -> None:
    assert stamp(T0) == "2026-12-03T13:14:51.123Z "
    assert stamp(T0.astimezone(timezone(timedelta(hours=2)))) == "2026-12-03T13:14:51.123Z "
    assert len(stamp(T0)) == STAMP_WIDTH


def test_each_line_is_stamped_once_with_the_time_its_first_piece_came() -> None:
    stamper = LineStamper()
    clock = ticking()
    pieces = ["first li", "ne\nsecond\nthi", "rd", " line\n", "", "no newline at the end"]
    text = "".join(stamper.stamp(piece, next(clock)) for piece in pieces)
    assert text.splitlines() == [
        "2026-12-03T13:14:51.123Z first line",
        "2026-12-03T13:14:52.123Z second",
        "2026-12-03T13:14:52.123Z third line",
        "2026-12-03T13:14:56.123Z no newline at the end",
    ]
    assert not stamper.at_line_start


def test_empty_lines_are_stamped_and_a_carriage_return_ends_no_line() -> None:
    stamper = LineStamper()
    assert stamper.stamp("\n\n10%\r20%\n", T0).split("\n") == [
        "2026-12-03T13:14:51.123Z ",
        "2026-12-03T13:14:51.123Z ",
        "2026-12-03T13:14:51.123Z 10%\r20%",
        "",
    ]
    assert stamper.at_line_start


@pytest.mark.parametrize("seed", range(20))
def test_stamps_come_off_however_the_stamped_log_is_cut(seed: int) -> None:
    rng = random.Random(seed)
    original = "".join(rng.choice(["a", "bc", "\n", "é", " ", "2026"]) for _ in range(400))
    stamper = LineStamper()
    clock = ticking()
    stamped = "".join(stamper.stamp(piece, next(clock)) for piece in cut(rng, original))
    assert all(STAMPED.match(line) for line in stamped.split("\n")[:-1])
    remover = StampRemover()
    back = "".join(remover.feed(piece) for piece in cut(rng, stamped)) + remover.flush()
    assert back == original


def test_a_log_without_stamps_passes_through() -> None:
    remover = StampRemover()
    text = "plain\nshort\n2026-12-03 not a stamp at all\nx"
    assert remover.feed(text) + remover.flush() == text


def cut(rng: random.Random, text: str) -> list[str]:
    points = sorted(rng.sample(range(len(text) + 1), min(len(text), 30)))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def assignment(attempt_id: str = "a1", try_number: int = 1) -> worker_pb2.Assignment:
    return worker_pb2.Assignment(
        attempt=worker_pb2.AttemptRef(attempt_id=attempt_id, try_number=try_number, task_instance_id=7)
    )


def failed(error: str, **fields: Any) -> Outcome:
    return Outcome(False, 1, error, T0, T0, **fields)


def test_offsets_count_utf8_bytes_and_characters_split_between_reads_stay_whole() -> None:
    clock = ticking()
    logs = AttemptLogs(clock=lambda: next(clock))
    [first] = logs.output("a1", "héllo\nwor".encode() + b"\xc3")  # the first byte of "é"
    [second] = logs.output("a1", b"\xa9ld\x00\n")
    assert first.offset == 0 and second.offset == len(first.text.encode())
    assert first.text == "2026-12-03T13:14:51.123Z héllo\n2026-12-03T13:14:51.123Z wor"
    assert second.text == "éld\ufffd\n"  # NUL cannot be stored


def test_a_big_read_is_stored_in_pieces_a_registry_takes() -> None:
    logs = AttemptLogs()
    pieces = logs.output("a1", b"\n" * 20_000)  # 20,000 stamped empty lines
    assert len(pieces) > 1 and all(len(p.text) <= MAX_LOG_PIECE_CHARS for p in pieces)
    assert [p.offset for p in pieces] == [
        sum(len(q.text.encode()) for q in pieces[:i]) for i in range(len(pieces))
    ]
    assert "".join(p.text for p in pieces).count("\n") == 20_000


def test_a_failure_ends_the_log_on_a_line_of_its_own_and_a_success_adds_nothing() -> None:
    clock = ticking()
    logs = AttemptLogs(clock=lambda: next(clock))
    assert logs.ended(assignment("quiet"), Outcome(True, 0, "", T0, T0)) == []
    logs.output("a1", b"partial")
    [note] = logs.ended(assignment("a1", 2), failed("ValueError: boom\nTraceback:\n  line\nValueError: boom"))
    assert note.offset == len(stamp(T0) + "partial")
    assert note.text.split("\n") == [
        "",
        "2026-12-03T13:14:52.123Z [schedd] try 2 failed: ValueError: boom",
        "2026-12-03T13:14:52.123Z Traceback:",
        "2026-12-03T13:14:52.123Z   line",
        "2026-12-03T13:14:52.123Z ValueError: boom",
        "",
    ]
    [shell] = logs.ended(assignment("a2"), failed("exit code 3; output tail:\nout", log_note="exit code 3"))
    assert shell.text.endswith(" [schedd] try 1 failed: exit code 3\n")
    [stopped] = logs.ended(assignment("a3"), failed("stopped before it finished", abandoned=True))
    assert "[schedd] try 1 was stopped: stopped before it finished" in stopped.text


def test_output_past_the_cap_is_cut_and_the_failure_still_fits() -> None:
    cap = NOTE_RESERVE + 1000
    logs = AttemptLogs(max_bytes=cap)
    kept = [logs.output("a1", b"x" * 99 + b"\n") for _ in range(50)]
    text = "".join(piece.text for pieces in kept for piece in pieces)
    output, marker = text.rstrip("\n").rsplit("\n", 1)
    assert 0 < len(output.encode()) + 1 <= 1000 and kept[-1] == []
    assert marker.endswith(" [schedd] output past 1000 bytes is not kept")
    [note] = logs.ended(assignment(), failed("E" * 100_000 + "\n" * 10_000))
    assert note.offset == len(text.encode())
    assert len(text.encode()) + len(note.text.encode()) <= cap


async def test_a_python_task_s_output_is_passed_on_while_it_runs() -> None:
    pieces: list[tuple[float, bytes]] = []
    async with PythonPool(1, kill_grace=0.5) as pool:
        began = time.monotonic()
        out = await pool.run(
            "tests.unit.pypool_tasks:sleep_and_print",
            env={},
            timeout=10,
            params={"seconds": 1.0},
            on_output=lambda data: pieces.append((time.monotonic(), data)),
        )
        ended = time.monotonic()
    assert out.succeeded and out.output == ""
    assert b"".join(data for _, data in pieces) == b"about to sleep\n"
    assert pieces[0][0] - began < 0.6 and ended - pieces[0][0] > 0.4, (began, pieces, ended)


async def test_a_python_task_s_output_is_passed_on_when_its_process_dies() -> None:
    pieces: list[bytes] = []
    async with PythonPool(1, kill_grace=0.5) as pool:
        out = await pool.run(
            "tests.unit.pypool_tasks:hard_exit",
            env={},
            timeout=10,
            params={"code": 3},
            on_output=pieces.append,
        )
    assert not out.succeeded and b"".join(pieces) == b"before exit\n"


async def test_a_shell_killed_by_a_signal_says_which() -> None:
    out = await asyncio.wait_for(run_shell("kill -9 $$", env={}, timeout=10, kill_grace=1), 20)
    assert not out.succeeded and out.log_note == "killed by SIGKILL" and out.error == "killed by SIGKILL"
