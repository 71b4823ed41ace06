"""Three DAGs: a ``with`` DAG, a ``@dag`` function the loader calls, and a ``@dag`` function this
module calls itself (the loader must not build that one twice)."""

from __future__ import annotations

from schedd_sdk import DAG, dag, shell
from tests.unit.sdk_examples.tasks import extract, load, transform

with DAG("multi_with", tags=["a"]) as multi_with:
    load(transform(extract()))

alias = multi_with  # the same DAG bound twice counts once


@dag
def multi_decorated() -> None:
    """Built by the loader."""
    shell("echo hi", task_id="hi") >> extract()


@dag(dag_id="multi_called")
def called() -> None:
    extract()


called_dag = called()
