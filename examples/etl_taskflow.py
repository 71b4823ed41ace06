"""ETL with TaskFlow: extract >> transform >> load, a report, and a cleanup on failure.

As in Airflow's TaskFlow, ``transform(raw)`` passes ``extract``'s return value to ``transform``
at run time and makes the edge; ``summary["total"]`` passes one key of ``transform``'s dict.
The retries and backoff of the Python tasks are declared where the functions are
(``examples/tasks/etl.py``); ``default_args`` gives the shell tasks theirs.

Register it from the repository root: ``schedctl dags register examples/etl_taskflow.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from examples.tasks.etl import extract, load, transform
from schedd_sdk import TriggerRule, dag, shell


@dag(
    schedule="@daily",
    start_date=datetime(2024, 1, 1),
    tags=["example", "etl"],
    dagrun_timeout=timedelta(hours=1),
    default_args={"retries": 1, "retry_delay": timedelta(seconds=5)},
)
def etl_taskflow() -> None:
    """Extract rows, summarise them, load the summary; report on success, clean up on failure."""
    raw = extract()
    summary = transform(raw)
    loaded = load(summary["total"], rows=summary["rows"])
    loaded >> shell('echo "loaded: $SCHEDD_UPSTREAM_RESULTS"', task_id="report")
    [raw, summary, loaded] >> shell(
        'echo "a step failed in run $SCHEDD_RUN_ID; cleaning up"',
        task_id="cleanup",
        trigger_rule=TriggerRule.ONE_FAILED,
        retries=0,
    )
