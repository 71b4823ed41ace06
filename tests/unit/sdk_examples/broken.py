"""Raises while it is imported."""

from __future__ import annotations

from schedd_sdk import DAG, shell

with DAG("broken") as broken:
    shell("echo hi", task_id="hi")

SETTINGS: dict[str, int] = {}
LIMIT = SETTINGS["limit"]
