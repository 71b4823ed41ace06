"""Where a value lands in a ``/bin/sh -c`` command, and how it is quoted there.

A rendered template is shell text with placeholders where the values of its ``{{ ... }}``
expressions go (``schedd_core.templates``). :func:`place_values` reads that text the way the shell
tokenises it and puts each value in, quoted for the place it lands in, so that it is one literal
word or part of one and never shell syntax:

* outside quotes (also inside ``$( )`` and ``( )``): ``shlex.quote``;
* inside double quotes: ``\\``, ``$``, backquote and ``"`` escaped with a backslash;
* inside single quotes: each ``'`` written as ``'\\''``.

The reading follows POSIX ``sh`` (dash, and bash in POSIX mode, as ``/bin/sh`` runs it): quotes,
backslash escapes, line continuations (removed before operators and words are read), comments
(``#`` at the start of a word), special parameters (``$$``, ``$#``), and the nesting of ``$( )``,
``${ }``, ``$(( ))``, bash's ``(( ))`` and backquotes. Places whose quoting rules are not modelled
refuse a value (:class:`PlacementError`, naming the place): a comment, backquotes, ``${ }``,
``$(( ))``, ``(( ))``, ``$' '``, right after ``$`` or an escaping backslash, and anything after a
here-document operator (``<<``), after ``$' '`` (which shells read differently) or bash's ``$[ ]``,
inside what may be an array subscript (``a[``, evaluated by bash), after the word
``case`` inside ``$( )`` (whose patterns end in an unbalanced ``)``) or after ``((`` closed by a
single ``)``. Not guaranteed: that the command is valid shell; how a shell that continues after a
syntax error (bash outside POSIX mode) reads what follows the error; and that the program a value
is given to treats it as data (``sh -c {{ x }}``, ``eval`` or bash arithmetic run it as code, by
the author's choice). ``tests/unit/test_shell_values.py`` runs rendered commands with random shell
around hostile values through ``/bin/sh`` and bash in POSIX mode.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

#: Frames whose quoting rules are not modelled: a value inside one is refused.
_REFUSED = {
    "comment": "inside a comment",
    "backtick": "inside backquotes (use $( ) instead)",
    "param": "inside ${ }",
    "arith": "inside $(( )) or (( ))",
    "ansi": "inside $' '",
}
_DELIMITERS = frozenset(" \t\n;&|()<>")
_SPECIAL_PARAMETERS = frozenset("$?#!@*-0123456789")
#: A word that opens an array subscript (``a[``), which bash evaluates, quotes or not.
_SUBSCRIPT = re.compile(r"[A-Za-z_]\w*\[[^\]]*\Z")


class PlacementError(Exception):
    """A value lands where it cannot be quoted safely; the message names the place."""


@dataclass
class _Frame:
    kind: str  # "top", "subshell", "single", "double", or a key of _REFUSED
    depth: int = 0  # open ( inside a subshell or arith frame
    word: str = ""  # the word being read, in a top or subshell frame


def _double_quoted(value: str) -> str:
    return re.sub(r'([\\$`"])', r"\\\1", value)


def _single_quoted(value: str) -> str:
    return value.replace("'", "'\\''")


class _Reader:
    """One pass over the text: a stack of frames, and the output with the values placed."""

    def __init__(self, text: str, placeholder: re.Pattern[str], values: Sequence[str]) -> None:
        self.text = text
        self.values = values
        self.placeholder = placeholder
        self.slots = {m.start(): m for m in placeholder.finditer(text)}
        self.stack = [_Frame("top")]
        self.out: list[str] = []
        self.poisoned = ""  # why every later value is refused

    def run(self) -> str:
        i = 0
        while i < len(self.text):
            slot = self.slots.get(i)
            if slot is None:
                i = self._step(i)
                continue
            self.out.append(self._place(self.values[int(slot.group(1))], i))
            self.stack[-1].word += "\0"  # a quoted word: never a keyword, and no comment follows
            i = slot.end()
        return "".join(self.out)

    def _place(self, value: str, at: int) -> str:
        where = next((_REFUSED[f.kind] for f in self.stack if f.kind in _REFUSED), self.poisoned)
        words = [f.word for f in self.stack if f.kind in ("top", "subshell")]
        if not where and _SUBSCRIPT.match(words[-1]):
            where = "inside an array subscript (a[ ])"
        if where:
            before = self.placeholder.sub("{{ }}", self.text[max(0, at - 40) : at])[-30:]
            raise PlacementError(f"a value lands {where} (after {before!r}), where it cannot be quoted")
        kind = self.stack[-1].kind
        if kind == "single":
            return _single_quoted(value)
        if kind == "double":
            return _double_quoted(value)
        return shlex.quote(value)

    def _refuse_next_slot(self, i: int, why: str) -> None:
        if i in self.slots:
            raise PlacementError(f"a value lands {why}, where it cannot be quoted")

    def _emit(self, i: int, count: int = 1) -> int:
        self.out.append(self.text[i : i + count])
        return i + count

    def _logical(self, i: int) -> int:
        """The first index at or after ``i`` that is not in a line continuation (``\\`` newline),
        which the shell removes before it reads operators and words."""
        while self.text.startswith("\\\n", i):
            i += 2
        return i

    def _ahead(self, i: int, count: int) -> tuple[str, int]:
        """The next ``count`` characters from ``i`` as the shell reads them, and the index after."""
        chars = ""
        while len(chars) < count and (i := self._logical(i)) < len(self.text):
            chars += self.text[i]
            i += 1
        return chars, i

    def _emit_to(self, i: int, end: int) -> int:
        return self._emit(i, end - i)

    def _step(self, i: int) -> int:
        frame = self.stack[-1]
        ch = self.text[i]
        if ch == "\\" and frame.kind != "single":
            self._refuse_next_slot(i + 1, "right after a backslash")
        if frame.kind in ("single", "comment", "backtick", "ansi"):
            return self._literal(i, frame, ch)
        if self.text[i : i + 2] == "\\\n":  # a line continuation: as if neither were there
            return self._emit(i, 2)
        if frame.kind in ("top", "subshell"):
            if ch in _DELIMITERS:
                return self._delimiter(i, frame, ch)
            if ch == "#" and not frame.word:
                self.stack.append(_Frame("comment"))
                return self._emit(i)
            frame.word += ch
        if ch == "\\":
            return self._emit(i, 2)
        if ch == "$":
            return self._dollar(i, frame)
        if ch == "`":
            self.stack.append(_Frame("backtick"))
        elif ch == '"' and frame.kind == "double":
            self.stack.pop()
        elif ch == '"':
            self.stack.append(_Frame("double"))
        elif frame.kind == "double":
            pass
        elif ch == "'":
            self.stack.append(_Frame("single"))
        elif frame.kind == "param" and ch == "}":
            self.stack.pop()
        elif frame.kind == "arith":
            return self._arith(i, frame, ch)
        return self._emit(i)

    def _literal(self, i: int, frame: _Frame, ch: str) -> int:
        """Inside single quotes, a comment, backquotes or ``$' '``: only the end matters."""
        if ch == "\\" and frame.kind in ("backtick", "ansi"):
            return self._emit(i, 2)
        end = {"single": "'", "comment": "\n", "backtick": "`", "ansi": "'"}[frame.kind]
        if ch == end:
            self.stack.pop()
        return self._emit(i)

    def _dollar(self, i: int, frame: _Frame) -> int:
        self._refuse_next_slot(self._logical(i + 1), "right after $")
        ahead, _ = self._ahead(i + 1, 2)
        one = self._ahead(i + 1, 1)[1]  # the index after the next character
        if ahead[:1] in _SPECIAL_PARAMETERS:  # $$, $#, $? ...: not the start of anything
            return self._emit_to(i, one)
        if ahead == "((":
            self.stack.append(_Frame("arith"))
            return self._emit_to(i, self._ahead(i + 1, 2)[1])
        if ahead[:1] in ("(", "{"):
            self.stack.append(_Frame("subshell" if ahead[:1] == "(" else "param"))
            return self._emit_to(i, one)
        if ahead[:1] == "'" and frame.kind != "double":
            self.stack.append(_Frame("ansi"))
            self.poisoned = "after $' ' (which shells read differently)"
            return self._emit_to(i, one)
        if ahead[:1] == "[":
            self.poisoned = "after $[ ] (bash's arithmetic)"
        return self._emit(i)

    def _arith(self, i: int, frame: _Frame, ch: str) -> int:
        """Inside ``$(( ))`` or ``(( ))``: it ends at ``))`` outside inner parentheses."""
        if ch == "(":
            frame.depth += 1
        elif ch == ")" and frame.depth:
            frame.depth -= 1
        elif ch == ")":
            self.stack.pop()
            following, end = self._ahead(i + 1, 1)
            if following == ")":
                return self._emit_to(i, end)
            self.poisoned = "after (( closed by a single )"
        return self._emit(i)

    def _delimiter(self, i: int, frame: _Frame, ch: str) -> int:
        """A blank or an operator character of a top or subshell frame: the word ends."""
        if frame.word == "case" and frame.kind == "subshell":
            self.poisoned = "after a case statement inside $( )"
        at_start, frame.word = not frame.word, ""
        following, end = self._ahead(i + 1, 1)
        if ch == "<" and following == "<":
            self.poisoned = "after a here-document operator (<<)"
        elif ch == "(" and at_start and following == "(":
            self.stack.append(_Frame("arith"))  # bash's (( )) command
            return self._emit_to(i, end)
        elif ch == "(" and frame.kind == "subshell":
            frame.depth += 1
        elif ch == ")" and frame.kind == "subshell" and frame.depth:
            frame.depth -= 1
        elif ch == ")" and frame.kind == "subshell":
            self.stack.pop()
        return self._emit(i)


def place_values(text: str, placeholder: re.Pattern[str], values: Sequence[str]) -> str:
    """``text`` with each match of ``placeholder`` (whose group 1 is an index into ``values``)
    replaced by that value, quoted for where it lands; PlacementError where no quoting is safe."""
    return _Reader(text, placeholder, values).run()
