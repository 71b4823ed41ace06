"""Python tasks used by ``test_mapping``: workers import them as ``tests.e2e.mapping_tasks:<function>``.

The tests never call them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def numbers(params: dict[str, Any]) -> list[int]:
    """The list to map over: ``0 .. n-1`` for the run's conf ``n``."""
    return list(range(int(params["n"])))


def square(x: int, offset: int = 0) -> int:
    return x * x + offset


def total(values: list[int]) -> dict[str, Any]:
    """A reduce over a mapped task's results: how many, their sum, and the first few in order."""
    return {"count": len(values), "sum": sum(values), "head": values[:5]}


def fails_once_for(x: int, bad: int, marker_dir: str) -> int:
    """Fails the first time it runs for ``x == bad`` (leaving a marker), succeeds otherwise."""
    marker = Path(marker_dir) / f"failed-{x}"
    if x == bad and not marker.exists():
        marker.write_text("failed once\n")
        raise RuntimeError(f"element {x} fails on purpose the first time")
    return x


def pair(letter: str, number: int) -> str:
    return f"{letter}{number}"


def joined(values: list[str]) -> str:
    return ",".join(values)


def not_a_list() -> dict[str, int]:
    return {"a": 1}


def identity(x: int) -> dict[str, str]:
    """What an instance is told of itself: its idempotency key and map index."""
    return {"key": os.environ["SCHEDD_IDEMPOTENCY_KEY"], "map_index": os.environ["SCHEDD_MAP_INDEX"]}


def hold(x: int, seconds: float) -> int:
    """Takes a while, so that instances allowed to overlap would."""
    time.sleep(seconds)
    return x


def nothing(x: int) -> None:
    """Stores no result."""


def described(values: Any) -> str:
    return repr(values)
