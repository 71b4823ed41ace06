"""A DAG whose task asks for a key its upstream task's result does not have (a run-time failure)."""

from __future__ import annotations

from schedd_sdk import dag
from tests.unit.sdk_examples.taskflow import numbers, split, total


@dag
def missing_key() -> None:
    parts = split(numbers())
    total(parts["nope"])
