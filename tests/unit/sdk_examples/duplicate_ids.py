"""Two DAGs with one id."""

from __future__ import annotations

from schedd_sdk import DAG, dag, shell

with DAG("same") as first:
    shell("echo 1", task_id="one")


@dag(dag_id="same")
def second() -> None:
    shell("echo 2", task_id="two")
