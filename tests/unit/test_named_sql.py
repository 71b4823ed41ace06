"""Statements with ``:name`` placeholders as asyncpg runs them, and the rows they return."""

from __future__ import annotations

import pytest

from schedd_store import statements
from schedd_store.named_sql import MissingParameter, Statement
from schedd_store.rows import Result, ResultCountError, Row


def test_each_name_gets_one_number_wherever_it_appears() -> None:
    text, args = Statement("SELECT :a, :b WHERE x = :a").arguments({"a": 1, "b": 2, "unused": 3})
    assert (text, args) == ("SELECT $1, $2 WHERE x = $1", [1, 2])


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT x::text",  # a cast
        "SELECT '08:00'",  # a time in a literal
        "SELECT a[1:2]",  # an array slice
        "SELECT make_interval(secs => 2)",
        "SELECT a[:2]",
    ],
)
def test_what_is_not_a_placeholder_is_left_as_written(sql: str) -> None:
    assert Statement(sql).arguments({}) == (sql, [])


def test_a_cast_after_a_placeholder_stays() -> None:
    assert Statement("SELECT :ids::bigint[]").arguments({"ids": [1]}) == ("SELECT $1::bigint[]", [[1]])


def test_a_value_given_when_run_wins_over_a_bound_one() -> None:
    statement = Statement("SELECT :a, :b", {"a": "bound"}).bindparams(b="also bound")
    assert statement.arguments({})[1] == ["bound", "also bound"]
    assert statement.arguments({"a": "given"})[1] == ["given", "also bound"]


def test_a_missing_value_names_the_placeholder() -> None:
    with pytest.raises(MissingParameter, match=":worker_id"):
        Statement("SELECT :worker_id").arguments({})


def test_every_statement_of_the_store_has_the_placeholders_sqlalchemy_saw_in_it() -> None:
    """The statements were written for SQLAlchemy's ``text()``: the same names must be found."""
    from sqlalchemy import text  # the migrations' library, not the services'

    found = 0
    for name in dir(statements):
        value = getattr(statements, name)
        if isinstance(value, Statement):
            assert set(value.compiled().names) == set(text(value.text)._bindparams), name
            found += 1
    assert found > 200


def _result(*rows: dict[str, object]) -> Result:
    # asyncpg's Record cannot be built outside a query; a mapping behaves as one does here
    return Result([_Record(r) for r in rows])


class _Record(dict[str, object]):
    def __getitem__(self, key: str | int) -> object:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


def test_rows_read_by_attribute_name_position_and_as_tuples() -> None:
    row = _result({"id": 7, "state": "queued"}).one()
    assert (row.id, row["state"], row[0], tuple(row), len(row)) == (7, "queued", 7, (7, "queued"), 2)
    assert row == (7, "queued") and row._mapping["state"] == "queued"
    with pytest.raises(AttributeError):
        _ = row.missing


def test_how_many_rows_a_question_expects() -> None:
    none, two = _result(), _result({"n": 1}, {"n": 2})
    assert (none.first(), none.one_or_none(), none.scalar(), none.all()) == (None, None, None, [])
    assert (two.scalar(), two.scalars(), [r.n for r in two]) == (1, [1, 2], [1, 2])
    for ask in (none.one, two.one, two.one_or_none, none.scalar_one):
        with pytest.raises(ResultCountError):
            ask()
    assert isinstance(two.first(), Row)
