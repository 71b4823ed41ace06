"""Helpers for task functions while they run on a worker.

Workers pass a task call's arguments to the function (:mod:`schedd_sdk.arguments`); every direct
upstream task's return value also arrives in the environment variable ``SCHEDD_UPSTREAM_RESULTS``.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["upstream_results"]


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
