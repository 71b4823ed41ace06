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

Modules: :mod:`~schedd_sdk.dags` (``DAG``, ``@dag``), :mod:`~schedd_sdk.functions` (``@task``),
:mod:`~schedd_sdk.task_functions` (what calling a ``@task`` function does),
:mod:`~schedd_sdk.tasks` (``Task``, ``shell``, edges), :mod:`~schedd_sdk.arguments` (TaskFlow
values), :mod:`~schedd_sdk.options` (options, ``Callback``, the rules),
:mod:`~schedd_sdk.compile` (to the spec, validation), :mod:`~schedd_sdk.loader` (DAG files),
:mod:`~schedd_sdk.targets` (import paths), :mod:`~schedd_sdk.runtime` (helpers for running
tasks), :mod:`~schedd_sdk.errors`; :mod:`~schedd_sdk.protocols` has what the modules know of the
ones built on them (none imports upward). The task context (``ds``, ``ti``, ``dag_run``..., passed to the
task functions that declare them, and :func:`get_current_context`) is
:mod:`schedd_core.task_context`, which the workers import without the SDK.

Guaranteed: a DAG that ``to_spec`` returns passed the server's own validation (except the check
that its pools exist); the spec of a DAG is the same every time it is built, so its version hash
is stable. Python tasks are named ``module:qualname`` and checked to resolve, in this process, to
the decorated function. Not guaranteed: that workers have those modules (they import them from
their installed packages and their working directory, the repository root).

The arguments of a task call (``load(transform(extract()))``) are passed at run time, resolved
from the upstream tasks' stored return values, and declare the edges (:mod:`schedd_sdk.arguments`);
:mod:`~schedd_sdk.groups` has task groups, :mod:`~schedd_sdk.setup_teardown` setup and teardown
tasks, :mod:`~schedd_sdk.mapping` mapped tasks (``fn.partial(...).expand(...)``).
"""

from __future__ import annotations

from schedd_core.task_context import (
    DagRunInfo,
    NoTaskContext,
    TaskContext,
    TaskInstanceInfo,
    get_current_context,
)
from schedd_sdk.arguments import TaskResult
from schedd_sdk.assets import Asset, AssetAll, AssetAny, AssetOrTimeSchedule
from schedd_sdk.dags import DAG, DagFunction, dag
from schedd_sdk.deadlines import DeadlineAlert, DeadlineReference
from schedd_sdk.errors import DagDefinitionError, DagLoadError, DagValidationError
from schedd_sdk.functions import TaskFunction, task
from schedd_sdk.groups import TaskGroup, task_group
from schedd_sdk.mapping import PartialTask
from schedd_sdk.notifiers import Notifier
from schedd_sdk.options import Callback, TaskOptions, TriggerRule, WeightRule
from schedd_sdk.params import Param
from schedd_sdk.runtime import map_index, upstream_results
from schedd_sdk.secrets import Connection, Variable
from schedd_sdk.sensors import PokeReturnValue as PokeReturnValue
from schedd_sdk.setup_teardown import setup, teardown
from schedd_sdk.tasks import Task, chain, shell
from schedd_sdk.timetables import (
    ContinuousTimetable,
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DeltaDataIntervalTimetable,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
    OnceTimetable,
)

__all__ = [
    "DAG",
    "Asset",
    "AssetAll",
    "AssetAny",
    "AssetOrTimeSchedule",
    "Callback",
    "Connection",
    "ContinuousTimetable",
    "CronDataIntervalTimetable",
    "CronTriggerTimetable",
    "DagDefinitionError",
    "DagFunction",
    "DagLoadError",
    "DagRunInfo",
    "DagValidationError",
    "DeadlineAlert",
    "DeadlineReference",
    "DeltaDataIntervalTimetable",
    "DeltaTriggerTimetable",
    "EventsTimetable",
    "MultipleCronTriggerTimetable",
    "NoTaskContext",
    "Notifier",
    "OnceTimetable",
    "Param",
    "PartialTask",
    "Task",
    "TaskContext",
    "TaskFunction",
    "TaskGroup",
    "TaskInstanceInfo",
    "TaskOptions",
    "TaskResult",
    "TriggerRule",
    "Variable",
    "WeightRule",
    "chain",
    "dag",
    "get_current_context",
    "map_index",
    "setup",
    "shell",
    "task",
    "task_group",
    "teardown",
    "upstream_results",
]
