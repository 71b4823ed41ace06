"""Python tasks and callbacks used by ``test_semantics`` and ``test_control``.

Workers run with the repository root as their working directory, so DAG specs name these as
``tests.e2e.semantics_tasks:<function>``. Workers import this module; the tests never call it.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

#: Set in the workers' environment by the tests: the file Python callbacks append their events to.
EVENTS_FILE_ENV = "SEMANTICS_EVENTS_FILE"


def choose(params: dict[str, Any]) -> Any:
    """A branch task: follow the task id (or list of ids) given in the run's conf as ``follow``."""
    return params["follow"]


def record_event(params: dict[str, Any]) -> None:
    """A Python callback: append the event it was given (as ``params``) to the events file, one JSON
    object per line."""
    line = json.dumps(params, sort_keys=True) + "\n"
    with open(os.environ[EVENTS_FILE_ENV], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(line)


def fail_once(params: dict[str, Any]) -> str:
    """Fails the first time it runs for a marker path (and creates the marker), succeeds afterwards."""
    marker = Path(params["marker"])
    if not marker.exists():
        marker.write_text("failed once\n")
        raise RuntimeError(f"first attempt fails on purpose (marker {marker} created)")
    return "second time lucky"
