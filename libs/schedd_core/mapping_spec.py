"""Validation of a mapped task's options (``TaskSpec.mapping``) and what the scheduler reads of them.

A mapped task is a Python task, not a branch, sensor, setup or teardown task and without
``depends_on_past``; it expands over one or more keyword arguments its callable does not also get
from ``python.kwargs``, each a literal list or the result of a direct upstream task. A bad option is
an :class:`InvalidArgument` naming its field (``spec.tasks[2].mapping.expand[0].values``).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument, quote

#: At most this many arguments to expand over.
MAX_EXPANDED_ARGUMENTS = 16


@dataclass(frozen=True)
class ExpandSource:
    """Where one expanded argument's list comes from: a literal list of known length, or the result
    (or a key of the result) of an upstream task."""

    name: str
    literal_length: int | None = None
    task_id: str = ""
    key: str | None = None


def expand_sources(task: pb.TaskSpec) -> tuple[ExpandSource, ...]:
    """The expanded arguments of a (validated) task, in order; empty for a task that is not mapped."""
    sources = []
    for arg in task.mapping.expand:
        if arg.values.WhichOneof("value") == "literal":
            sources.append(ExpandSource(arg.name, literal_length=len(arg.values.literal.list_value.values)))
        else:
            ref = arg.values.result
            sources.append(
                ExpandSource(arg.name, task_id=ref.task_id, key=ref.key if ref.HasField("key") else None)
            )
    return tuple(sources)


def check_mapping(where: str, task: pb.TaskSpec) -> None:
    """Raise :class:`InvalidArgument` for the first bad mapping option of ``task`` (at ``where``)."""
    if not task.HasField("mapping"):
        return
    field = f"{where}.mapping"
    if task.WhichOneof("action") != "python":
        raise InvalidArgument(
            field, "only a Python task can be mapped: its instances get the elements as arguments"
        )
    for flag, what in (
        ("branch", "a branch task"),
        ("setup", "a setup task"),
        ("teardown", "a teardown task"),
        ("depends_on_past", "a task with depends_on_past"),
    ):
        if getattr(task, flag):
            raise InvalidArgument(field, f"{what} cannot be mapped")
    if task.HasField("sensor"):
        raise InvalidArgument(field, "a sensor cannot be mapped")
    if not task.mapping.expand:
        raise InvalidArgument(f"{field}.expand", "must name at least one argument to expand over")
    if len(task.mapping.expand) > MAX_EXPANDED_ARGUMENTS:
        raise InvalidArgument(
            f"{field}.expand",
            f"has {len(task.mapping.expand)} arguments; the limit is {MAX_EXPANDED_ARGUMENTS}",
        )
    names: set[str] = set()
    for i, arg in enumerate(task.mapping.expand):
        at = f"{field}.expand[{i}]"
        if not arg.name.isidentifier():
            raise InvalidArgument(f"{at}.name", f"{quote(arg.name)} is not a Python argument name")
        if arg.name in names:
            raise InvalidArgument(f"{at}.name", f"{quote(arg.name)} is expanded twice")
        if arg.name in task.python.kwargs:
            raise InvalidArgument(
                f"{at}.name", f"{quote(arg.name)} is also a partial (python.kwargs) argument"
            )
        names.add(arg.name)
        kind = arg.values.WhichOneof("value")
        if kind == "literal":
            if arg.values.literal.WhichOneof("kind") != "list_value":
                raise InvalidArgument(f"{at}.values.literal", "must be a list")
        elif kind == "result":
            if arg.values.result.task_id not in task.upstream:
                raise InvalidArgument(
                    f"{at}.values.result",
                    f"refers to the result of {quote(arg.values.result.task_id)}, not an upstream task",
                )
        else:
            raise InvalidArgument(f"{at}.values", "must be a literal list or an upstream task's result")
