"""A DAG whose task functions are defined in the DAG file itself (named by this file's module)."""

from __future__ import annotations

from schedd_sdk import dag, task


@task
def step() -> str:
    return "done"


@task(trigger_rule="all_done")
def finish() -> None:
    pass


@dag
def local_tasks() -> None:
    step() >> finish()


if __name__ == "__main__":
    import json

    from google.protobuf import json_format

    print(json.dumps(json_format.MessageToDict(local_tasks().to_spec())))
