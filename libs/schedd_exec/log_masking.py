"""Masking the values a task read (variables, connection passwords) in its log, in the worker, before
the log leaves for storage.

The worker registers each value when it hands it to the task (before the task can print it), and
every piece of the task's output passes through :meth:`SecretMask.feed`, which replaces each value
with ``***``. Output arrives in pieces, so a value may be split between two reads: the end of the text
that could be the start of a value is held back until the next piece (or :meth:`flush`) says how it
goes on. Guaranteed: no registered value of at least ``MIN_MASKED_CHARS`` characters reaches the
returned text, whatever the piece boundaries. Not guaranteed: values shorter than that (masking
``"1"`` would mask every digit), a value the task transformed (encoded, reversed, split with other
text between its parts), and output written before the value was read.
"""

from __future__ import annotations

MASK = "***"
#: Values shorter than this are not masked.
MIN_MASKED_CHARS = 4


class SecretMask:
    def __init__(self) -> None:
        self._values: list[str] = []
        self._held = ""

    def add(self, values: list[str]) -> None:
        """Mask these values from now on (each also as its lines, in case it spans several)."""
        known = set(self._values)
        for value in values:
            for part in {value, *value.splitlines()}:
                if len(part) >= MIN_MASKED_CHARS and part not in known:
                    known.add(part)
        self._values = sorted(known, key=len, reverse=True)

    @property
    def active(self) -> bool:
        return bool(self._values)

    def mask(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def feed(self, text: str) -> str:
        """The masked text that can be passed on now; a possible start of a value is held back."""
        if not self._values:
            return text
        combined = self.mask(self._held + text)
        keep = self._partial_tail(combined)
        self._held = combined[len(combined) - keep :] if keep else ""
        return combined[: len(combined) - keep]

    def flush(self) -> str:
        """What was held back, masked (the output ended)."""
        rest, self._held = self.mask(self._held), ""
        return rest

    def _partial_tail(self, text: str) -> int:
        """The length of the longest end of ``text`` that is the start of a value (not all of it)."""
        longest = 0
        for value in self._values:
            for size in range(min(len(value) - 1, len(text)), longest, -1):
                if text.endswith(value[:size]):
                    longest = size
                    break
        return longest
