"""What a statement returns: rows read by attribute, by name, by position or as a tuple.

A :class:`Row` wraps one asyncpg record: ``row.state``, ``row["state"]``, ``row[0]``, ``row[2:5]``,
``a, b = row`` and ``row._mapping`` (the record itself, a read-only mapping) all work, and a row
equals the tuple of its values. A :class:`Result` holds every row the statement returned (the store
reads whole results; nothing streams) and answers the usual questions about them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg


class ResultCountError(LookupError):
    """A result had no row, or more than one, where exactly one was expected."""


class Row(Sequence[Any]):
    """One row of a result (see the module docstring)."""

    __slots__ = ("_mapping",)

    def __init__(self, record: asyncpg.Record) -> None:
        self._mapping = record

    def __getattr__(self, name: str) -> Any:
        try:
            return self._mapping[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: int | str | slice) -> Any:
        return self._mapping[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._mapping.values())

    def __len__(self) -> int:
        return len(self._mapping)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class Result:
    """Every row one statement returned, in order."""

    __slots__ = ("_records",)

    def __init__(self, records: Sequence[asyncpg.Record]) -> None:
        self._records = records

    def __iter__(self) -> Iterator[Row]:
        return (Row(r) for r in self._records)

    def all(self) -> list[Row]:
        return [Row(r) for r in self._records]

    def first(self) -> Row | None:
        """The first row, or None when there is none."""
        return Row(self._records[0]) if self._records else None

    def one(self) -> Row:
        """The only row; :class:`ResultCountError` when there is none or more than one."""
        if len(self._records) != 1:
            raise ResultCountError(f"expected exactly one row, got {len(self._records)}")
        return Row(self._records[0])

    def one_or_none(self) -> Row | None:
        """The only row, or None; :class:`ResultCountError` when there are several."""
        if len(self._records) > 1:
            raise ResultCountError(f"expected at most one row, got {len(self._records)}")
        return self.first()

    def scalar(self) -> Any:
        """The first column of the first row, or None when there is no row."""
        return self._records[0][0] if self._records else None

    def scalar_one(self) -> Any:
        """The first column of the only row (see :meth:`one`)."""
        return self.one()[0]

    def scalars(self) -> list[Any]:
        """The first column of each row."""
        return [r[0] for r in self._records]
