"""Top-level task functions and callbacks for the SDK tests (workers would import them by name)."""

from __future__ import annotations

from typing import Any

from schedd_sdk import task, upstream_results


@task
def extract() -> list[int]:
    return [1, 2, 3]


@task(retries=2)
def transform(rows: list[int] | None = None) -> int:
    """Sums ``rows`` when given, else what ``upstream_results()`` holds of ``extract``."""
    return sum(rows if rows is not None else upstream_results().get("extract", []))


@task
def load(rows: object = None) -> None:
    """``rows`` has a default: it may be called without arguments."""


@task
def with_params(params: dict[str, Any], context: dict[str, str]) -> dict[str, Any]:
    return {"params": params, "task": context.get("SCHEDD_TASK_ID")}


@task.branch
def pick() -> str:
    return "left"


@task.branch(trigger_rule="all_done")
def pick_later() -> list[str]:
    return ["left", "right"]


@task
def left() -> None:
    pass


@task
def right() -> None:
    pass


def plain(params: dict[str, Any]) -> int:
    """Not decorated: made a task with ``task(...)(plain)`` in the tests."""
    return len(params)


def notify(context: dict[str, str]) -> None:
    """A callback."""
