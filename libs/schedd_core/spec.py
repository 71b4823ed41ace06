"""Validation and identity of DAG specs.

``validate_spec`` rejects a malformed spec with an :class:`InvalidArgument`
naming the offending field (``tasks[3].upstream[0]``). ``version_hash`` is the
identity of a DAG version: the SHA-256 of the spec's deterministic protobuf
serialisation with upstream lists sorted, so two specs that mean the same thing
hash the same. It is stable for one protobuf schema; adding a field with a
non-default value changes it, which is intended.
"""

from __future__ import annotations

import graphlib
import hashlib
import re
from collections.abc import Iterable, Mapping

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument

#: Ids of DAGs, tasks, pools and runs: letters, digits and ``_ - .``, starting with a letter or digit.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,249}")

MAX_TASKS = 10_000
MAX_DEPTH = 1_000
MAX_SPEC_BYTES = 4 * 1024 * 1024
MAX_COMMAND_BYTES = 64 * 1024


def check_id(field: str, value: str) -> None:
    """Raise unless ``value`` is a valid schedd identifier."""
    if not value:
        raise InvalidArgument(field, "must not be empty")
    if not ID_PATTERN.fullmatch(value):
        raise InvalidArgument(
            field,
            f"{value!r} is not a valid id: use letters, digits, '_', '-' or '.', start with a letter or "
            "digit, at most 250 characters",
        )


def validate_spec(spec: pb.DagSpec, *, known_pools: Iterable[str] | None = None) -> None:
    """Raise :class:`InvalidArgument` for the first problem found in ``spec``.

    Checks ids, duplicates, unknown upstream ids, cycles (the message lists the
    cycle), numeric options, size limits and, when ``known_pools`` is given,
    that every pool exists.
    """
    size = spec.ByteSize()
    if size > MAX_SPEC_BYTES:
        raise InvalidArgument("spec", f"is {size} bytes; the limit is {MAX_SPEC_BYTES}")
    check_id("spec.dag_id", spec.dag_id)
    if not spec.tasks:
        raise InvalidArgument("spec.tasks", "a DAG needs at least one task")
    if len(spec.tasks) > MAX_TASKS:
        raise InvalidArgument("spec.tasks", f"has {len(spec.tasks)} tasks; the limit is {MAX_TASKS}")
    if spec.max_active_runs < 0:
        raise InvalidArgument("spec.max_active_runs", "must not be negative")
    if spec.max_active_tasks < 0:
        raise InvalidArgument("spec.max_active_tasks", "must not be negative")

    pools = set(known_pools) if known_pools is not None else None
    seen: dict[str, int] = {}
    for i, task in enumerate(spec.tasks):
        where = f"spec.tasks[{i}]"
        check_id(f"{where}.task_id", task.task_id)
        if task.task_id in seen:
            raise InvalidArgument(
                f"{where}.task_id", f"duplicate task id {task.task_id!r} (also tasks[{seen[task.task_id]}])"
            )
        seen[task.task_id] = i
        _validate_task_options(where, task, pools)

    for i, task in enumerate(spec.tasks):
        for j, up in enumerate(task.upstream):
            if up not in seen:
                raise InvalidArgument(f"spec.tasks[{i}].upstream[{j}]", f"unknown task id {up!r}")
            if up == task.task_id:
                raise InvalidArgument(f"spec.tasks[{i}].upstream[{j}]", "a task cannot depend on itself")

    graph = upstream_map(spec)
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        raise InvalidArgument("spec.tasks", "cycle: " + " -> ".join(cycle)) from None
    depth = _depth(order, graph)
    if depth > MAX_DEPTH:
        raise InvalidArgument("spec.tasks", f"dependency chain of {depth} tasks; the limit is {MAX_DEPTH}")


def _validate_task_options(where: str, task: pb.TaskSpec, pools: set[str] | None) -> None:
    action = task.WhichOneof("action")
    if action is None:
        raise InvalidArgument(f"{where}", "needs an action: shell or python")
    if action == "shell":
        if not task.shell.command.strip():
            raise InvalidArgument(f"{where}.shell.command", "must not be empty")
        if len(task.shell.command.encode()) > MAX_COMMAND_BYTES:
            raise InvalidArgument(f"{where}.shell.command", f"is longer than {MAX_COMMAND_BYTES} bytes")
    if action == "python" and not re.fullmatch(
        r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", task.python.target, re.ASCII
    ):
        raise InvalidArgument(f"{where}.python.target", "must look like 'package.module:function'")
    if task.branch and action != "python":
        raise InvalidArgument(
            f"{where}.branch", "a branch task must be a Python task: it returns the ids to follow"
        )
    if task.transactional and action != "python":
        raise InvalidArgument(f"{where}.transactional", "a transactional task must be a Python task")
    if task.transactional and task.branch:
        raise InvalidArgument(f"{where}.transactional", "a branch task cannot be transactional")
    if task.max_active_instances < 0:
        raise InvalidArgument(f"{where}.max_active_instances", "must not be negative")
    if task.retries < 0:
        raise InvalidArgument(f"{where}.retries", "must not be negative")
    for name in ("retry_delay", "max_retry_delay"):
        duration = getattr(task, name)
        if duration.seconds < 0 or duration.nanos < 0:
            raise InvalidArgument(f"{where}.{name}", "must not be negative")
    timeout = task.execution_timeout
    if task.HasField("execution_timeout") and (timeout.seconds, timeout.nanos) <= (0, 0):
        raise InvalidArgument(f"{where}.execution_timeout", "must be positive")
    if task.pool_slots < 0:
        raise InvalidArgument(f"{where}.pool_slots", "must not be negative")
    if task.pool:
        check_id(f"{where}.pool", task.pool)
        if pools is not None and task.pool not in pools:
            raise InvalidArgument(f"{where}.pool", f"unknown pool {task.pool!r}")
    if task.queue:
        check_id(f"{where}.queue", task.queue)
    for key in task.env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise InvalidArgument(f"{where}.env", f"{key!r} is not a valid environment variable name")


def upstream_map(spec: pb.DagSpec) -> dict[str, set[str]]:
    """task id -> ids of its direct upstream tasks."""
    return {t.task_id: set(t.upstream) for t in spec.tasks}


def downstream_map(spec: pb.DagSpec) -> dict[str, set[str]]:
    """task id -> ids of its direct downstream tasks."""
    result: dict[str, set[str]] = {t.task_id: set() for t in spec.tasks}
    for t in spec.tasks:
        for up in t.upstream:
            result[up].add(t.task_id)
    return result


def _depth(order: list[str], graph: Mapping[str, set[str]]) -> int:
    level: dict[str, int] = {}
    for node in order:
        level[node] = 1 + max((level[u] for u in graph[node]), default=0)
    return max(level.values(), default=0)


def canonical(spec: pb.DagSpec) -> pb.DagSpec:
    """A copy of ``spec`` with order-insensitive lists (tasks, upstream ids, tags) sorted."""
    copy = pb.DagSpec()
    copy.CopyFrom(spec)
    tasks = sorted(copy.tasks, key=lambda t: t.task_id)
    del copy.tasks[:]
    copy.tasks.extend(tasks)
    for task in copy.tasks:
        ups = sorted(set(task.upstream))
        del task.upstream[:]
        task.upstream.extend(ups)
    tags = sorted(set(copy.tags))
    del copy.tags[:]
    copy.tags.extend(tags)
    return copy


def version_hash(spec: pb.DagSpec) -> str:
    """The identity of a DAG version: 16 hex digits of SHA-256 over the canonical spec."""
    data = canonical(spec).SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()[:16]
