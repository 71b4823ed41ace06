"""Python tasks of ``test_sensors``: workers import them as ``tests.e2e.sensor_tasks:<function>``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schedd_sdk import PokeReturnValue, task


@task.sensor
def marker_text(params: dict[str, Any]) -> PokeReturnValue:
    """Done once the marker file exists, with the file's text as the task's result."""
    marker = Path(params["marker"])
    if not marker.exists():
        return PokeReturnValue(False)
    return PokeReturnValue(True, marker.read_text().strip())
