"""Resource names: ``dags/{dag}``, ``dags/{dag}/runs/{run}``, ``dags/{dag}/runs/{run}/tasks/{key}``,
``backfills/{id}``.

A task instance's key is its task id, or ``{task_id}[{map_index}]`` for an instance of a mapped task
(``schedd_core.mapping``). Parsing a name also checks every id in it (``schedd_core.identifiers.check_id``)
and a map index's form (decimal, no sign, no leading zero), so a malformed or absurdly long id is
refused as INVALID_ARGUMENT naming the request field, before any lookup. Whether the key names an
existing task instance is not checked here.
"""

from __future__ import annotations

from schedd_core.errors import InvalidArgument, quote
from schedd_core.identifiers import check_id
from schedd_core.mapping import split_key


def dag_name(dag_id: str) -> str:
    return f"dags/{dag_id}"


def run_name(dag_id: str, run_id: str) -> str:
    return f"dags/{dag_id}/runs/{run_id}"


def task_name(dag_id: str, run_id: str, key: str) -> str:
    """The name of a task instance; ``key`` is its task id or ``task_id[map_index]``."""
    return f"dags/{dag_id}/runs/{run_id}/tasks/{key}"


def parse_dag_name(name: str, field: str = "name") -> str:
    parts = name.split("/")
    if len(parts) != 2 or parts[0] != "dags" or not parts[1]:
        raise InvalidArgument(field, f"{quote(name)} is not a DAG name; expected 'dags/{{dag_id}}'")
    return _ids(field, parts[1])[0]


#: The run id that stands for a DAG's newest run (``dags/etl/runs/@latest``); no run id can be it.
LATEST_RUN = "@latest"


def parse_run_name(name: str, field: str = "name", *, latest: bool = False) -> tuple[str, str]:
    """``dags/{dag_id}/runs/{run_id}`` -> (dag id, run id); with ``latest``, the run id may also be
    ``@latest`` (resolved by the caller)."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "dags" or parts[2] != "runs" or not parts[1] or not parts[3]:
        raise InvalidArgument(
            field, f"{quote(name)} is not a run name; expected 'dags/{{dag_id}}/runs/{{run_id}}'"
        )
    if latest and parts[3] == LATEST_RUN:
        return _ids(field, parts[1])[0], LATEST_RUN
    dag_id, run_id = _ids(field, parts[1], parts[3])
    return dag_id, run_id


def parse_task_name(name: str, field: str = "name", *, latest: bool = False) -> tuple[str, str, str]:
    """``dags/{dag_id}/runs/{run_id}/tasks/{key}`` -> (dag id, run id, key), the key a task id or
    ``task_id[map_index]``; with ``latest``, the run id may also be ``@latest`` (resolved by the
    caller)."""
    parts = name.split("/")
    if len(parts) != 6 or parts[0] != "dags" or parts[2] != "runs" or parts[4] != "tasks" or not all(parts):
        raise InvalidArgument(
            field,
            f"{quote(name)} is not a task name; expected "
            "'dags/{dag_id}/runs/{run_id}/tasks/{task_id}' or '.../tasks/{task_id}[{map_index}]'",
        )
    dag_id, run_id = parse_run_name("/".join(parts[:4]), field, latest=latest)
    parse_task_key(parts[5], field)
    return dag_id, run_id, parts[5]


def parse_task_key(key: str, field: str) -> tuple[str, int]:
    """``task_id`` -> (task id, -1); ``task_id[i]`` -> (task id, i); InvalidArgument naming ``field``
    for anything else."""
    try:
        task_id, map_index = split_key(key)
    except ValueError:
        raise InvalidArgument(
            field,
            f"{quote(key)} is not a task id or task_id[map_index] (a map index is a non-negative "
            "decimal number of at most 9 digits, without leading zeros)",
        ) from None
    check_id(field, task_id)
    return task_id, map_index


def parse_worker_name(name: str, field: str = "name") -> str:
    return _one_level(name, field, "workers", "worker", "worker_id")


def parse_token_name(name: str, field: str = "name") -> str:
    return _one_level(name, field, "tokens", "token", "name")


def parse_pool_name(name: str, field: str = "name") -> str:
    return _one_level(name, field, "pools", "pool", "pool")


def _one_level(name: str, field: str, collection: str, kind: str, id_name: str) -> str:
    """``{collection}/{id}`` -> the id, checked."""
    parts = name.split("/")
    if len(parts) != 2 or parts[0] != collection or not parts[1]:
        raise InvalidArgument(
            field, f"{quote(name)} is not a {kind} name; expected '{collection}/{{{id_name}}}'"
        )
    return _ids(field, parts[1])[0]


def parse_version_name(name: str, field: str = "name") -> tuple[str, str]:
    """``dags/{dag_id}/versions/{version_hash}`` -> (dag id, version hash)."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "dags" or parts[2] != "versions" or not parts[3]:
        raise InvalidArgument(
            field,
            f"{quote(name)} is not a version name; expected 'dags/{{dag_id}}/versions/{{version_hash}}'",
        )
    if not (parts[3].isascii() and parts[3].isalnum()) or len(parts[3]) > 128:
        raise InvalidArgument(field, f"{quote(parts[3])} is not a version hash")
    return _ids(field, parts[1])[0], parts[3]


def backfill_name(backfill_id: int) -> str:
    return f"backfills/{backfill_id}"


def parse_backfill_name(name: str, field: str = "name") -> int:
    prefix, _, rest = name.partition("/")
    if prefix != "backfills" or not (rest.isascii() and rest.isdigit()) or len(rest) > 18:
        raise InvalidArgument(field, f"{quote(name)} is not a backfill name; expected 'backfills/{{id}}'")
    return int(rest)


def _ids(field: str, *ids: str) -> tuple[str, ...]:
    for value in ids:
        check_id(field, value)
    return ids
