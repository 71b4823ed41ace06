"""Time stamps on the lines of a task's log.

A stored log line starts with the UTC time it was written, to the millisecond, and one space:
``2026-12-03T13:14:51.123Z starting``. :class:`LineStamper` adds the stamps to output read in
pieces of any size: every line gets exactly one stamp, the time of the piece its first character
came in (a line split across pieces is stamped once), and a last line without a newline is kept and
stamped as soon as it starts. Only ``\\n`` ends a line (a ``\\r`` of a progress bar does not).

:class:`StampRemover` takes the stamps off again, from text fed in pieces of any size, for readers
that want the output as the task wrote it. It removes a stamp only where one is, at the start of a
line, so a log stored without stamps passes through unchanged; a line of such a log that itself
starts with text of exactly the stamp's form would lose it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

#: The width of a stamp with its trailing space.
STAMP_WIDTH = len("2026-12-03T13:14:51.123Z ")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def stamp(moment: datetime) -> str:
    """The stamp of ``moment`` (an aware datetime), with its trailing space."""
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z "


class LineStamper:
    """Stamps the lines of one stream of output, piece by piece."""

    __slots__ = ("_at_line_start",)

    def __init__(self) -> None:
        self._at_line_start = True

    @property
    def at_line_start(self) -> bool:
        """Whether the output so far ends with a complete line (or there was none)."""
        return self._at_line_start

    def stamp(self, text: str, moment: datetime) -> str:
        """``text`` with a stamp of ``moment`` before each line that starts in it."""
        if not text:
            return ""
        prefix = stamp(moment)
        stamped = text.replace("\n", "\n" + prefix)
        if text.endswith("\n"):
            stamped = stamped[: -len(prefix)]  # the next line has not started yet
        if self._at_line_start:
            stamped = prefix + stamped
        self._at_line_start = text.endswith("\n")
        return stamped


class StampRemover:
    """Removes the stamps from one stamped log read in pieces; :meth:`flush` at its end."""

    __slots__ = ("_at_line_start", "_held")

    def __init__(self) -> None:
        self._at_line_start = True
        self._held = ""

    def feed(self, text: str) -> str:
        """What ``text`` adds to the log without stamps. The start of a line shorter than a stamp is
        held back until it is known whether it is one."""
        data = self._held + text
        self._held = ""
        out: list[str] = []
        pos = 0
        while pos < len(data):
            if self._at_line_start:
                head = data[pos : pos + STAMP_WIDTH]
                if len(head) < STAMP_WIDTH and "\n" not in head:
                    self._held = head
                    break
                if _STAMP.fullmatch(head):
                    pos += STAMP_WIDTH
                self._at_line_start = False
            end = data.find("\n", pos)
            if end < 0:
                out.append(data[pos:])
                break
            out.append(data[pos : end + 1])
            pos = end + 1
            self._at_line_start = True
        return "".join(out)

    def flush(self) -> str:
        """What is held back at the end of the log."""
        held, self._held = self._held, ""
        return held
