"""Tasks of ``examples/etl_taskflow.py``: extract, transform and load some rows.

Workers import this module as ``examples.tasks.etl`` and call the functions with the arguments
of their calls in the DAG (upstream return values, resolved from the stored results) and with
``params`` and/or ``context`` when they declare them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from schedd_sdk import task


@task(
    params={"rows": 5},
    retries=3,
    retry_delay=timedelta(seconds=2),
    retry_exponential_backoff=True,
    max_retry_delay=timedelta(seconds=30),
    execution_timeout=timedelta(minutes=5),
)
def extract(params: dict[str, Any]) -> list[dict[str, int]]:
    """Produce ``params["rows"]`` rows (a run's ``--conf '{"rows": 10}'`` overrides it)."""
    count = int(params.get("rows", 5))
    return [{"id": i, "amount": 10 * i} for i in range(count)]


@task(retries=2, retry_delay=timedelta(seconds=1), retry_exponential_backoff=True)
def transform(rows: list[dict[str, int]]) -> dict[str, int]:
    """Summarise the rows ``extract`` returned (a dict return: its keys can be passed on alone)."""
    return {"rows": len(rows), "total": sum(r["amount"] for r in rows)}


@task(retries=1)
def load(total: int, rows: int, context: dict[str, str]) -> dict[str, Any]:
    """Pretend to write the summary; returns what it wrote."""
    print(f"run {context.get('SCHEDD_RUN_ID', '?')}: loading total={total} of {rows} rows")
    return {"loaded": {"rows": rows, "total": total}, "run_id": context.get("SCHEDD_RUN_ID", "")}
