"""Tasks of ``examples/branching.py``: choose a full or an incremental refresh, then publish."""

from __future__ import annotations

from typing import Any

from schedd_sdk import TriggerRule, task, upstream_results


@task.branch(params={"full": False})
def choose_path(params: dict[str, Any]) -> str:
    """Follow ``full_refresh`` when the run's conf says ``{"full": true}``, else ``incremental``."""
    return "full_refresh" if params.get("full") else "incremental"


@task
def full_refresh() -> dict[str, str]:
    print("rebuilding everything")
    return {"mode": "full"}


@task
def incremental() -> dict[str, str]:
    print("applying the latest changes")
    return {"mode": "incremental"}


@task(trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
def publish() -> dict[str, Any]:
    """Runs after whichever path ran (the other one is skipped)."""
    results = upstream_results()
    print(f"publishing after {sorted(results)}")
    return {"after": sorted(results)}
