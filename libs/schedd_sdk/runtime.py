"""Helpers for task functions while they run on a worker.

Workers pass a task call's arguments to the function (:mod:`schedd_sdk.arguments`); every direct
upstream task's return value also arrives in the environment variable ``SCHEDD_UPSTREAM_RESULTS``,
and an instance of a mapped task learns which one it is from ``SCHEDD_MAP_INDEX``.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["map_index", "upstream_results"]


def upstream_results() -> dict[str, Any]:
    """The return values of this task's direct upstream tasks, by task id (parsed JSON).

    An upstream task that returned None, was skipped or failed has no entry; outside a worker
    (no ``SCHEDD_UPSTREAM_RESULTS``) the result is empty.
    """
    raw = os.environ.get("SCHEDD_UPSTREAM_RESULTS", "")
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"SCHEDD_UPSTREAM_RESULTS is not a JSON object: {raw[:200]!r}")
    return value


def map_index() -> int:
    """Which instance of a mapped task this is (0, 1, ...: the position of its elements in the lists it
    expands over, ``schedd_sdk.mapping``); -1 for a task that is not mapped, or outside a worker."""
    raw = os.environ.get("SCHEDD_MAP_INDEX", "")
    if not raw:
        return -1
    if not raw.isdigit():
        raise ValueError(f"SCHEDD_MAP_INDEX is not a map index: {raw[:50]!r}")
    return int(raw)
