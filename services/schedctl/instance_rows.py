"""Which rows a run's table shows for its task instances, and how a task instance is named in them
(its key, ``process[3]`` for a mapped instance): one per task instance, except that a mapped
task with many instances is summarised (``-o table``): a line with its instance count by state, then
only its instances that have not succeeded, at most a few, then how many more were left out.
``-o wide`` lists every instance; JSON and YAML always hold every one (they do not use this).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby

from schedd.v1 import resources_pb2 as pb
from schedd_core.mapping import instance_key

#: A mapped task with more instances than this is summarised in a table.
SUMMARISED_AFTER = 10
#: At most this many instances are listed below a summary (those that have not succeeded).
LISTED_UNDER_SUMMARY = 10


@dataclass(frozen=True)
class Summary:
    """A mapped task's line: its instance count, by state (states in the enum's order)."""

    task_id: str
    total: int
    by_state: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class LeftOut:
    """How many instances of a summarised task that have not succeeded were not listed."""

    task_id: str
    count: int


Row = pb.TaskInstance | Summary | LeftOut


def table_rows(task_instances: Sequence[pb.TaskInstance], *, wide: bool) -> Iterator[Row]:
    """The rows, in the order of ``task_instances`` (a task's instances next to each other)."""
    for task_id, group in groupby(task_instances, key=lambda t: t.task_id):
        instances = list(group)
        mapped = any(t.map_index >= 0 for t in instances)
        if wide or not mapped or len(instances) <= SUMMARISED_AFTER:
            yield from instances
            continue
        yield _summary(task_id, instances)
        unfinished = [t for t in instances if t.state != pb.TASK_STATE_SUCCESS]
        yield from unfinished[:LISTED_UNDER_SUMMARY]
        if len(unfinished) > LISTED_UNDER_SUMMARY:
            yield LeftOut(task_id, len(unfinished) - LISTED_UNDER_SUMMARY)


def key_of(ti: pb.TaskInstance) -> str:
    """How a task instance is shown: ``task_id``, or ``task_id[map_index]`` for a mapped instance."""
    return instance_key(ti.task_id, ti.map_index)


def _summary(task_id: str, instances: list[pb.TaskInstance]) -> Summary:
    counts: dict[pb.TaskState.ValueType, int] = {}
    for t in instances:
        counts[t.state] = counts.get(t.state, 0) + 1
    by_state = tuple(
        (str(pb.TaskState.Name(state)).removeprefix("TASK_STATE_").lower(), counts[state])
        for state in sorted(counts)
    )
    return Summary(task_id, len(instances), by_state)
