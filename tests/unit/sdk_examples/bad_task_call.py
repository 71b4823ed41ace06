"""A DAG definition that passes a task function, not its task, to a task call."""

from __future__ import annotations

from schedd_sdk import dag
from tests.unit.sdk_examples.tasks import extract, load


@dag
def bad_task_call() -> None:
    load(extract)
