"""Resource names: ``dags/{dag}``, ``dags/{dag}/runs/{run}``, ``dags/{dag}/runs/{run}/tasks/{task}``."""

from __future__ import annotations

from schedd_core.errors import InvalidArgument


def dag_name(dag_id: str) -> str:
    return f"dags/{dag_id}"


def run_name(dag_id: str, run_id: str) -> str:
    return f"dags/{dag_id}/runs/{run_id}"


def task_name(dag_id: str, run_id: str, task_id: str) -> str:
    return f"dags/{dag_id}/runs/{run_id}/tasks/{task_id}"


def parse_dag_name(name: str, field: str = "name") -> str:
    parts = name.split("/")
    if len(parts) != 2 or parts[0] != "dags" or not parts[1]:
        raise InvalidArgument(field, f"{name!r} is not a DAG name; expected 'dags/{{dag_id}}'")
    return parts[1]


def parse_run_name(name: str, field: str = "name") -> tuple[str, str]:
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "dags" or parts[2] != "runs" or not parts[1] or not parts[3]:
        raise InvalidArgument(
            field, f"{name!r} is not a run name; expected 'dags/{{dag_id}}/runs/{{run_id}}'"
        )
    return parts[1], parts[3]


def parse_task_name(name: str, field: str = "name") -> tuple[str, str, str]:
    parts = name.split("/")
    if len(parts) != 6 or parts[0] != "dags" or parts[2] != "runs" or parts[4] != "tasks" or not all(parts):
        raise InvalidArgument(
            field,
            f"{name!r} is not a task name; expected 'dags/{{dag_id}}/runs/{{run_id}}/tasks/{{task_id}}'",
        )
    return parts[1], parts[3], parts[5]


def parse_worker_name(name: str, field: str = "name") -> str:
    parts = name.split("/")
    if len(parts) != 2 or parts[0] != "workers" or not parts[1]:
        raise InvalidArgument(field, f"{name!r} is not a worker name; expected 'workers/{{worker_id}}'")
    return parts[1]
