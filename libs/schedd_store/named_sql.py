"""SQL statements with named parameters (``:name``), as the store writes them, compiled for asyncpg.

A :class:`Statement` is the text of one statement with ``:name`` placeholders and the values some
of them are bound to when it is defined (the transition guards of ``schedd_store.statements``).
asyncpg takes numbered parameters (``$1``): each distinct name gets one number, every occurrence of
the name uses it, and the text is converted once per statement, the first time it runs.

What counts as a placeholder: a colon, not preceded by a colon or a word character, followed by a
name (a letter or ``_``, then letters, digits and ``_``). So PostgreSQL's casts (``x::text``, also
``:ids::bigint[]``), times in literals (``'08:00'``) and array slices (``a[1:2]``, ``a[:2]``) are left
as written.
What is not parsed: a ``:name`` inside a string literal or a comment would be taken for a
placeholder; the store's statements have none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class MissingParameter(KeyError):
    """A statement ran without a value for one of its placeholders."""


class Compiled(NamedTuple):
    """A statement as asyncpg runs it: the text with ``$n`` and the name of each ``$n`` in order."""

    text: str
    names: tuple[str, ...]


class Statement:
    """One SQL statement with ``:name`` placeholders (see the module docstring)."""

    __slots__ = ("_compiled", "bound", "text")

    def __init__(self, text: str, bound: Mapping[str, Any] | None = None) -> None:
        self.text = text
        #: Values bound when the statement was defined; a value given when it runs takes precedence.
        self.bound: dict[str, Any] = dict(bound or {})
        self._compiled: Compiled | None = None

    def bindparams(self, **values: Any) -> Statement:
        """This statement with ``values`` bound too."""
        return Statement(self.text, {**self.bound, **values})

    def compiled(self) -> Compiled:
        if self._compiled is None:
            numbers: dict[str, int] = {}

            def number(match: re.Match[str]) -> str:
                name = match.group(1)
                return f"${numbers.setdefault(name, len(numbers) + 1)}"

            text = _PLACEHOLDER.sub(number, self.text)
            self._compiled = Compiled(text, tuple(numbers))
        return self._compiled

    def arguments(self, parameters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
        """The text asyncpg runs and its positional arguments, from ``parameters`` and the bound
        values. Raises :class:`MissingParameter` naming a placeholder that has neither."""
        compiled = self.compiled()
        given = parameters or {}
        args: list[Any] = []
        for name in compiled.names:
            if name in given:
                args.append(given[name])
            elif name in self.bound:
                args.append(self.bound[name])
            else:
                raise MissingParameter(f"no value for the parameter :{name} of {self.text[:120]!r}")
        return compiled.text, args

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Statement({self.text[:80]!r})"
