"""Tasks of ``examples/taskflow_groups.py``: orders fetched, split into totals, reported."""

from __future__ import annotations

from typing import Any

from schedd_sdk import task


@task
def fetch_orders(region: str, count: int) -> list[dict[str, Any]]:
    """``count`` orders of ``region`` (made up)."""
    return [{"region": region, "amount": 10 * (i + 1)} for i in range(count)]


@task(multiple_outputs=True)
def summarise(orders: list[dict[str, Any]]) -> dict[str, Any]:
    """The number and total amount of some orders: two outputs, ``count`` and ``total``."""
    return {"count": len(orders), "total": sum(o["amount"] for o in orders)}


@task
def report(totals: dict[str, int], note: str = "") -> str:
    """One line: the total per region."""
    line = ", ".join(f"{region}={total}" for region, total in sorted(totals.items()))
    print(line + (f" ({note})" if note else ""))
    return line
