"""Domain errors: hierarchy and the data they carry."""

from __future__ import annotations

import pytest

from schedd_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    FencedOut,
    IllegalTransition,
    InvalidArgument,
    NotFound,
    ScheddError,
    Unavailable,
)


@pytest.mark.parametrize(
    "cls", [InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, FencedOut, Unavailable]
)
def test_every_error_is_a_schedd_error(cls: type[Exception]) -> None:
    assert issubclass(cls, ScheddError)


def test_precondition_failures() -> None:
    assert issubclass(IllegalTransition, FailedPrecondition)
    assert not issubclass(FencedOut, FailedPrecondition)


def test_invalid_argument_carries_field_and_problem() -> None:
    err = InvalidArgument("spec.tasks[1].upstream[0]", "unknown task id 'x'")
    assert err.field == "spec.tasks[1].upstream[0]"
    assert err.problem == "unknown task id 'x'"
    assert str(err) == "spec.tasks[1].upstream[0]: unknown task id 'x'"


def test_fenced_out_carries_both_tokens() -> None:
    err = FencedOut(token=3, current=5)
    assert (err.token, err.current) == (3, 5)
    assert "3" in str(err) and "5" in str(err)
