"""Task functions for the TaskFlow, group and setup/teardown tests (workers would import them)."""

from __future__ import annotations

from typing import Any

from schedd_sdk import setup, task, teardown


@task
def numbers(count: int = 3) -> list[int]:
    return list(range(1, count + 1))


@task
def total(values: list[int], *, scale: int = 1, label: str = "") -> dict[str, Any]:
    return {"total": sum(values) * scale, "label": label}


@task(multiple_outputs=True)
def split(values: list[int]) -> Any:
    return {"odd": [v for v in values if v % 2], "even": [v for v in values if not v % 2]}


@task
def not_a_dict() -> dict[str, int]:
    """Annotated as a dict (so multiple_outputs is inferred) but returns a list."""
    return [1]  # type: ignore[return-value]


@task
def combine(first: Any, second: Any = None, params: dict[str, Any] | None = None) -> list[Any]:
    return [first, second, params]


@setup
def make_scratch() -> str:
    return "/scratch"


@teardown
def drop_scratch(path: str) -> None:
    pass


@task
def work(path: str) -> None:
    pass
