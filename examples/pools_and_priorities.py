"""Pools and priorities: tasks competing for the slots of one pool, heavier work first.

Every refresh runs in the pool ``warehouse``; ``rebuild_index`` takes two of its slots. When the
pool is full, queued tasks wait and are taken in priority order: ``weight_rule="absolute"`` makes
a task's priority exactly its ``priority_weight`` (the default, ``downstream``, adds the weights of
the tasks after it). The pool ``warehouse`` must exist before the DAG is registered: the server
rejects a spec naming an unknown pool.

The task functions are plain functions in ``examples/tasks/warehouse.py``, made tasks here with
``task(...)(function)``; they keep their import path ``examples.tasks.warehouse:<name>``.
"""

from __future__ import annotations

from examples.tasks import warehouse
from schedd_sdk import WeightRule, dag, task

refresh = task(pool="warehouse", weight_rule=WeightRule.ABSOLUTE)(warehouse.refresh_table)
rebuild_index = task(pool="warehouse", pool_slots=2, priority_weight=10, weight_rule="absolute")(
    warehouse.rebuild_index
)
report = task(priority_weight=1)(warehouse.report)


@dag(tags=["example"], max_active_tasks=8)
def pools_and_priorities() -> None:
    """Refresh tables in a shared pool, the index first; then report."""
    tables = [
        refresh.override(task_id=f"refresh_{name}", priority_weight=weight, params={"table": name})()
        for name, weight in (("orders", 5), ("customers", 3), ("events", 1))
    ]
    [*tables, rebuild_index()] >> report()
