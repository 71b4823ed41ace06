"""How schedctl names a task instance: its key, ``TASK`` or ``TASK[N]`` for instance N of a mapped
task (``schedd_core.mapping``), given whole or as ``TASK`` with ``--map-index N`` (Airflow's flag).

A key is checked for its form here (exit 2 with a message for a malformed one); whether the task
is mapped, or has that instance, is the api's answer (NOT_FOUND, exit 3).
"""

from __future__ import annotations

from typing import Annotated

import typer

from schedctl.cli import EXIT_REJECTED, fail
from schedd_core.mapping import UNMAPPED, instance_key, split_key

MapIndexOption = Annotated[
    int | None,
    typer.Option(
        "--map-index",
        "-m",
        help="the instance of a mapped task (TASK[N] says the same; -1: not a mapped instance)",
        show_default=False,
    ),
]

MapIndexesOption = Annotated[
    list[int] | None,
    typer.Option(
        "--map-index",
        "-m",
        help="only these instances of the mapped TASKS given (repeatable; TASK[N] says the same)",
        show_default=False,
    ),
]


def task_key(task: str, map_index: int | None) -> str:
    """The key ``TASK`` and ``--map-index`` name; exits 2 for a malformed key, a negative index other
    than -1, or an index given both ways."""
    task_id, index = _split(task)
    if map_index is None or map_index == UNMAPPED:
        return task
    if map_index < UNMAPPED:
        fail(EXIT_REJECTED, f"--map-index {map_index} must be a map index (0, 1, ...) or -1")
    if index != UNMAPPED:
        fail(EXIT_REJECTED, f"TASK {task!r} has a map index already; drop it or --map-index")
    return instance_key(task_id, map_index)


def task_keys(tasks: list[str], map_indexes: list[int]) -> list[str]:
    """The keys ``TASKS`` and ``--map-index`` name: each task with each index when indexes are given
    (every one of them a plain task id), else the tasks as given (each checked)."""
    if not map_indexes:
        for task in tasks:
            _split(task)
        return tasks
    if not tasks:
        fail(EXIT_REJECTED, "--map-index needs the mapped TASKS it selects instances of")
    return [task_key(task, index) for task in tasks for index in map_indexes]


def _split(task: str) -> tuple[str, int]:
    try:
        return split_key(task)
    except ValueError:
        fail(
            EXIT_REJECTED,
            f"TASK {task!r} must be a task id or TASK[N], N a map index (0, 1, ... without leading zeros)",
        )
