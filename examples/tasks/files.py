"""Tasks of ``examples/mapping.py``: list the files that landed, count each one's rows, add them up."""

from __future__ import annotations

from schedd_sdk import map_index, task

#: The made-up size of each file, header line included.
LINES = {"eu/orders.csv": 121, "us/orders.csv": 81, "apac/orders.csv": 46}


@task
def list_files() -> list[str]:
    """The files that landed for the run (made up: one per region)."""
    return list(LINES)


@task
def count_rows(path: str, *, header: bool) -> int:
    """The rows of one file, less its header line."""
    rows = LINES[path] - (1 if header else 0)
    print(f"{path}: {rows} rows (instance {map_index()})")
    return rows


@task
def summarise(counts: list[int]) -> int:
    """The rows of every file: ``counts`` holds each instance's count, in map index order."""
    print(f"{len(counts)} files, {sum(counts)} rows")
    return sum(counts)


@task
def notify(channel: str, *, rows: int) -> str:
    """Announce the total on one channel."""
    message = f"{channel}: {rows} rows loaded"
    print(message)
    return message
