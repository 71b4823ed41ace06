"""schedd_sdk: write schedd DAGs in Python, the way Airflow users expect.

::

    from datetime import timedelta
    from schedd_sdk import dag, task, shell, upstream_results

    @task(retries=3, retry_delay=timedelta(seconds=10), retry_exponential_backoff=True)
    def extract() -> list[int]:
        return [1, 2, 3]

    @task
    def load() -> None:
        print(upstream_results()["extract"])

    @dag(schedule="@daily")
    def etl() -> None:
        "Extract and load."
        load(extract()) >> shell("echo done", task_id="notify")

``etl().to_spec()`` is the ``schedd.v1.DagSpec``; ``schedctl dags register FILE.py`` registers
every DAG the file defines (:func:`schedd_sdk.loader.load_dags`).

Modules: :mod:`~schedd_sdk.dags` (``DAG``, ``@dag``), :mod:`~schedd_sdk.tasks` (``Task``,
``@task``, ``shell``, edges), :mod:`~schedd_sdk.options` (options, ``Callback``, the rules),
:mod:`~schedd_sdk.compile` (to the spec, validation), :mod:`~schedd_sdk.loader` (DAG files),
:mod:`~schedd_sdk.targets` (import paths), :mod:`~schedd_sdk.runtime` (helpers for running
tasks), :mod:`~schedd_sdk.errors`.

Guaranteed: a DAG that ``to_spec`` returns passed the server's own validation (except the check
that its pools exist); the spec of a DAG is the same every time it is built, so its version hash
is stable. Python tasks are named ``module:qualname`` and checked to resolve, in this process, to
the decorated function. Not guaranteed: that workers have those modules (they import them from
their installed packages and their working directory, the repository root).

The arguments of a task call (``load(extract())``) declare dependencies only; they are not
passed at run time (see :mod:`schedd_sdk.tasks`).
"""

from __future__ import annotations

from schedd_sdk.dags import DAG, DagFunction, dag
from schedd_sdk.errors import DagDefinitionError, DagLoadError, DagValidationError
from schedd_sdk.options import Callback, TaskOptions, TriggerRule, WeightRule
from schedd_sdk.runtime import upstream_results
from schedd_sdk.tasks import Task, TaskFunction, chain, shell, task

__all__ = [
    "DAG",
    "Callback",
    "DagDefinitionError",
    "DagFunction",
    "DagLoadError",
    "DagValidationError",
    "Task",
    "TaskFunction",
    "TaskOptions",
    "TriggerRule",
    "WeightRule",
    "chain",
    "dag",
    "shell",
    "task",
    "upstream_results",
]
