"""Python task callables used by the chaos and end-to-end tests.

Workers (and schedulers with a local executor) run with the repository root as their working
directory, which the warm Python pool puts on ``sys.path``, so a DAG names these as
``tests.chaos.noop_tasks:FUNCTION``. Keep this module light: every child of the pool imports it.
"""

from __future__ import annotations

import json
import os
from typing import Any


def noop() -> None:
    """Does nothing: for throughput tests."""


def produce(params: dict[str, Any]) -> dict[str, Any]:
    """Returns a value derived from its params, for a downstream task to read."""
    base = int(params.get("base", 0))
    return {"doubled": base * 2, "items": [base, base + 1], "from": os.environ.get("SCHEDD_TASK_ID", "")}


def consume() -> dict[str, Any]:
    """Returns what it received from its upstream tasks (``SCHEDD_UPSTREAM_RESULTS``) as parsed JSON."""
    raw = os.environ.get("SCHEDD_UPSTREAM_RESULTS")
    return {"upstream": json.loads(raw) if raw else None}


def echo_params(params: dict[str, Any]) -> dict[str, Any]:
    """Returns the params it was called with."""
    return {"params": params}


def schedd_env() -> dict[str, str]:
    """Returns the ``SCHEDD_*`` variables of its environment."""
    return {k: v for k, v in os.environ.items() if k.startswith("SCHEDD_")}


def boom() -> None:
    """Fails with an exception whose message the tests look for."""
    raise ValueError("kaboom: this task fails on purpose (42)")
