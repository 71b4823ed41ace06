"""Defines task functions but no DAG."""

from __future__ import annotations

from schedd_sdk import task


@task
def lonely() -> None:
    pass
