"""Values a task read are masked in its log, whatever the boundaries of the pieces its output
arrives in; short values are left alone; the failure line is masked too."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from hypothesis import given, strategies as st

from schedd.v1 import worker_pb2
from schedd_exec.attempt_log import AttemptLogs
from schedd_exec.log_masking import SecretMask
from schedd_exec.outcome import Outcome

SECRET = "hunter2-XYZ-secret"


@given(cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8))
def test_a_value_split_across_pieces_never_passes(cuts: list[int]) -> None:
    text = f"start {SECRET} middle {SECRET[:5]} not a value {SECRET}{SECRET} end"
    mask = SecretMask()
    mask.add([SECRET])
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    out = "".join(mask.feed(text[a:b]) for a, b in itertools.pairwise(bounds)) + mask.flush()
    assert SECRET not in out
    assert out == f"start *** middle {SECRET[:5]} not a value ****** end"


def test_short_values_are_not_masked() -> None:
    mask = SecretMask()
    mask.add(["1", "ab"])
    assert not mask.active
    assert mask.feed("1 ab") == "1 ab"


def test_a_multi_line_value_is_masked_line_by_line_too() -> None:
    mask = SecretMask()
    mask.add(["line-one\nline-two"])
    assert mask.feed("x line-two y\n") + mask.flush() == "x *** y\n"


def _assignment() -> worker_pb2.Assignment:
    return worker_pb2.Assignment(attempt=worker_pb2.AttemptRef(attempt_id="a1", try_number=1))


def test_the_attempt_log_masks_output_and_the_failure_line() -> None:
    logs = AttemptLogs(clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    logs.add_secrets("a1", [SECRET])
    stored = [p.text for p in logs.output("a1", f"token={SECRET[:4]}".encode())]
    stored += [p.text for p in logs.output("a1", f"{SECRET[4:]}\n".encode())]
    now = datetime.now(UTC)
    assert logs.masked("a1", f"bad {SECRET}") == "bad ***"
    stored += [
        p.text for p in logs.ended(_assignment(), Outcome(False, 1, f"failed with {SECRET}", now, now))
    ]
    text = "".join(stored)
    assert SECRET not in text and "token=***" in text and "failed with ***" in text
