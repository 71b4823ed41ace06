"""The log of each attempt an executor runs, as it is stored: stamped lines, offsets, a size cap and
how the attempt failed.

A worker (and the scheduler's local executor) passes every piece of output of an attempt through
:meth:`AttemptLogs.output` and the attempt's end through :meth:`AttemptLogs.ended`; each returns the
pieces of text to store at the attempt's next offsets (none, one, or several: a piece has at most
``MAX_LOG_PIECE_CHARS`` characters of ``schedd_core.limits``, within what a registry takes in one
message). Guaranteed:

* Each line is stamped with the time its first character was read (``schedd_core.log_lines``);
  output is decoded as UTF-8 across pieces (a character split between two reads stays whole;
  undecodable bytes become U+FFFD), and NUL characters, which the store cannot hold, become U+FFFD.
* Offsets count the UTF-8 bytes of the text returned, as the store counts them.
* A failed, stopped or skipped attempt's log ends with a line saying so and why: the error (a
  Python task's traceback, an exit code, ``killed by SIGKILL``, a timeout), after the output, on a
  line of its own. A successful attempt adds nothing: an attempt that printed nothing and succeeded
  costs nothing here (but the end of its output held back by the masking, if any).
* Every value registered with :meth:`AttemptLogs.add_secrets` (what the task read: variables,
  connection passwords) is masked (``schedd_exec.log_masking``) in the output and in the failure
  line, before anything is returned for storage.
* The output kept stays ``NOTE_RESERVE`` bytes under the store's per-attempt cap (one marker line
  says where it was cut), so that the failure still fits within the cap.

Not guaranteed: that what is returned is stored (output is best effort, and the store enforces the
cap on its own, whatever a worker sends).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from schedd.v1 import worker_pb2
from schedd_core.limits import MAX_LOG_BYTES_PER_ATTEMPT, MAX_LOG_PIECE_CHARS
from schedd_core.log_lines import LineStamper
from schedd_exec.log_masking import SecretMask
from schedd_exec.outcome import Outcome

#: Bytes of the per-attempt cap kept for the line that says how the attempt failed.
NOTE_RESERVE = 16 * 1024
#: At most this many bytes and lines of the error go into the log (its start).
MAX_NOTE_BYTES = 8 * 1024
MAX_NOTE_LINES = 100


@dataclass(frozen=True)
class LogText:
    """Text to store at ``offset`` of an attempt's log."""

    offset: int
    text: str


@dataclass
class _Log:
    stamper: LineStamper = field(default_factory=LineStamper)
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    size: int = 0
    cut: bool = False
    mask: SecretMask = field(default_factory=SecretMask)


class AttemptLogs:
    """The logs of the attempts one executor runs, keyed by attempt id."""

    def __init__(
        self,
        *,
        max_bytes: int = MAX_LOG_BYTES_PER_ATTEMPT,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._budget = max_bytes - NOTE_RESERVE
        self._clock = clock
        self._logs: dict[str, _Log] = {}

    def add_secrets(self, attempt_id: str, values: list[str]) -> None:
        """Mask ``values`` in this attempt's log from now on."""
        log = self._logs.get(attempt_id)
        if log is None:
            log = self._logs[attempt_id] = _Log()
        log.mask.add(values)

    def masked(self, attempt_id: str, text: str) -> str:
        """``text`` (an error message of the attempt) with the attempt's registered values masked."""
        log = self._logs.get(attempt_id)
        return log.mask.mask(text) if log is not None else text

    def output(self, attempt_id: str, data: bytes) -> list[LogText]:
        """The stamped text of ``data``, read now from the attempt's output; nothing when there is
        no whole character yet, or the output is past the cap."""
        log = self._logs.get(attempt_id)
        if log is None:
            log = self._logs[attempt_id] = _Log()
        if log.cut:
            return []
        text = log.mask.feed(log.decoder.decode(data))
        if not text:
            return []
        stamped = log.stamper.stamp(_storable(text), self._clock())
        if log.size + len(stamped.encode()) > self._budget:
            log.cut = True
            stamped = log.stamper.stamp(
                ("" if log.stamper.at_line_start else "\n")
                + f"[schedd] output past {self._budget} bytes is not kept\n",
                self._clock(),
            )
        return self._append(log, stamped)

    def ended(self, assignment: worker_pb2.Assignment, outcome: Outcome) -> list[LogText]:
        """Forget the attempt; the lines that end its log when it did not succeed."""
        log = self._logs.pop(assignment.attempt.attempt_id, None)
        if log is None:
            log = _Log()
        rest = (
            ""
            if log.cut
            else _storable(log.mask.feed(log.decoder.decode(b"", final=True)) + log.mask.flush())
        )
        if outcome.succeeded:
            return self._append(log, log.stamper.stamp(rest, self._clock())) if rest else []
        if not (rest.endswith("\n") if rest else log.stamper.at_line_start):
            rest += "\n"  # the failure starts a line of its own
        how = "was stopped" if outcome.abandoned else "was skipped" if outcome.skipped else "failed"
        note = f"[schedd] try {assignment.attempt.try_number} {how}: {log.mask.mask(_reason(outcome))}\n"
        return self._append(log, log.stamper.stamp(rest + note, self._clock()))

    @staticmethod
    def _append(log: _Log, text: str) -> list[LogText]:
        pieces = []
        for start in range(0, len(text), MAX_LOG_PIECE_CHARS):
            piece = text[start : start + MAX_LOG_PIECE_CHARS]
            pieces.append(LogText(log.size, piece))
            log.size += len(piece.encode())
        return pieces


def _reason(outcome: Outcome) -> str:
    """How the attempt ended, bounded (its start is kept)."""
    reason = (outcome.log_note or outcome.error or "no reason given").rstrip("\n")
    lines = reason.encode()[:MAX_NOTE_BYTES].decode(errors="ignore").split("\n")[:MAX_NOTE_LINES]
    return _storable("\n".join(lines))


def _storable(text: str) -> str:
    return text.replace("\x00", "\ufffd")
