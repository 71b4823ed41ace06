"""Tasks of ``examples/pools_and_priorities.py``: plain functions, made tasks in the DAG file.

This module does not import the SDK: ``task(...)(warehouse.refresh_table)`` in the DAG file names
them ``examples.tasks.warehouse:<function>``, and workers import only this light module.
"""

from __future__ import annotations

import time
from typing import Any


def refresh_table(params: dict[str, Any]) -> dict[str, Any]:
    """Simulate refreshing one table (``params["table"]``) for ``params["seconds"]`` seconds."""
    time.sleep(float(params.get("seconds", 0.2)))
    return {"table": params.get("table", "?")}


def rebuild_index(params: dict[str, Any]) -> dict[str, Any]:
    """Simulate a heavy job that takes two slots of the warehouse pool."""
    time.sleep(float(params.get("seconds", 0.5)))
    return {"index": "rebuilt"}


def report() -> None:
    print("warehouse refreshed")
