"""TaskFlow values, multiple outputs and task groups.

Each ``region`` group fetches that region's orders and summarises them (``region_eu.fetch_orders``,
``region_eu.summarise``, ...; the group's ``default_args`` give its tasks two retries). ``report``
gets one key of each summary (``summary["total"]``) as the values of a dict argument, next to a
literal. ``start >> group`` and ``group >> done`` connect the groups as wholes.
"""

from __future__ import annotations

from examples.tasks.orders import fetch_orders, report, summarise
from schedd_sdk import TaskGroup, dag, shell


@dag(tags=["example"])
def taskflow_groups() -> None:
    """Fetch and summarise orders per region, report the totals."""
    start = shell("echo start", task_id="start")
    totals = {}
    for region, count in (("eu", 3), ("us", 2)):
        with TaskGroup(f"region_{region}", default_args={"retries": 2}) as group:
            summary = summarise(fetch_orders(region, count=count))
        start >> group
        totals[region] = summary["total"]
    done = report(totals, note="from the example")
    done >> shell("echo done", task_id="done")
