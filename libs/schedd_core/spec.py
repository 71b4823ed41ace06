"""Validation of DAG specs, where they enter schedd (the api, the SDK's compiler).

``validate_spec`` rejects a malformed spec with an :class:`InvalidArgument`
naming the offending field (``tasks[3].upstream[0]``). It checks parameter schemas
(jsonschema) and templates (Jinja), so it loads both; the services that only read
stored specs (the registry, the scheduler) import ``schedd_core.identifiers``,
``schedd_core.version_identity`` and ``schedd_core.graph`` instead, never this module.
"""

from __future__ import annotations

import graphlib
import re
from collections.abc import Mapping

from schedd.v1 import resources_pb2 as pb
from schedd_core.assets import normalize_spec_assets
from schedd_core.callback_spec import PYTHON_TARGET, check_callbacks, check_deadline
from schedd_core.durations import check_duration
from schedd_core.errors import InvalidArgument, quote
from schedd_core.graph import upstream_map
from schedd_core.identifiers import check_id
from schedd_core.limits import (
    MAX_COMMAND_BYTES,
    MAX_CONCURRENCY,
    MAX_DEPTH,
    MAX_DESCRIPTION_CHARS,
    MAX_ENV_BYTES,
    MAX_ID_CHARS,
    MAX_PARAMS_BYTES,
    MAX_PRIORITY_WEIGHT,
    MAX_RETRIES,
    MAX_SPEC_BYTES,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TASKS,
)
from schedd_core.mapping_spec import check_mapping
from schedd_core.params import check_param_schemas
from schedd_core.sensor_spec import check_sensor
from schedd_core.templates import check_template
from schedd_core.timetable_spec import timetable_of


def check_range(field: str, value: int, low: int, high: int) -> None:
    if low == 0 and value < 0:
        raise InvalidArgument(field, "must not be negative")
    if not low <= value <= high:
        raise InvalidArgument(field, f"must be between {low} and {high}, not {value}")


def validate_spec(spec: pb.DagSpec, *, known_pools: Mapping[str, int] | None = None) -> None:
    """Raise :class:`InvalidArgument` for the first problem found in ``spec``.

    Checks ids, duplicates, unknown upstream ids, cycles (the message lists the cycle), setup and
    teardown flags against their trigger rule, that a Python task's arguments refer only to its
    direct upstream tasks' results, every numeric option against its bounds, size limits and, when
    ``known_pools`` (pool name -> slots) is given, that every pool exists and has room for each
    task's ``pool_slots``.
    """
    _check_dag_fields(spec)
    seen = _check_tasks(spec, dict(known_pools) if known_pools is not None else None)
    for i, task in enumerate(spec.tasks):
        _check_task_links(f"spec.tasks[{i}]", task, seen)
    graph = upstream_map(spec)
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        raise InvalidArgument("spec.tasks", "cycle: " + " -> ".join(cycle)) from None
    depth = _depth(order, graph)
    if depth > MAX_DEPTH:
        raise InvalidArgument("spec.tasks", f"dependency chain of {depth} tasks; the limit is {MAX_DEPTH}")


def _check_dag_fields(spec: pb.DagSpec) -> None:
    """The DAG's own fields: size, id, task count, numeric bounds, description, tags, params,
    callbacks and schedule."""
    size = spec.ByteSize()
    if size > MAX_SPEC_BYTES:
        raise InvalidArgument("spec", f"is {size} bytes; the limit is {MAX_SPEC_BYTES}")
    check_id("spec.dag_id", spec.dag_id)
    if not spec.tasks:
        raise InvalidArgument("spec.tasks", "a DAG needs at least one task")
    if len(spec.tasks) > MAX_TASKS:
        raise InvalidArgument("spec.tasks", f"has {len(spec.tasks)} tasks; the limit is {MAX_TASKS}")
    check_range("spec.max_active_runs", spec.max_active_runs, 0, MAX_CONCURRENCY)
    check_range("spec.max_active_tasks", spec.max_active_tasks, 0, MAX_CONCURRENCY)
    if spec.HasField("dagrun_timeout"):
        check_duration("spec.dagrun_timeout", spec.dagrun_timeout, positive=True)
    if len(spec.description) > MAX_DESCRIPTION_CHARS:
        raise InvalidArgument("spec.description", f"is longer than {MAX_DESCRIPTION_CHARS} characters")
    if len(spec.tags) > MAX_TAGS:
        raise InvalidArgument("spec.tags", f"has {len(spec.tags)} tags; the limit is {MAX_TAGS}")
    for i, tag in enumerate(spec.tags):
        if not tag or len(tag) > MAX_TAG_CHARS:
            raise InvalidArgument(f"spec.tags[{i}]", f"must have 1 to {MAX_TAG_CHARS} characters")
    _check_params("spec.params", spec)
    check_param_schemas(spec)
    check_callbacks("spec", spec, ("on_failure", "on_success"))
    check_deadline(spec)
    timetable_of(spec)  # schedule, time zone, start and end dates
    normalize_spec_assets(spec)  # outlets, inlets and the asset schedule (on a copy)


def _check_tasks(spec: pb.DagSpec, pools: dict[str, int] | None) -> dict[str, int]:
    """Each task's id (unique), options and command template; the index of each task id."""
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
        if task.HasField("shell"):
            check_template(f"{where}.shell.command", task.shell.command)
    return seen


def _check_task_links(where: str, task: pb.TaskSpec, seen: Mapping[str, int]) -> None:
    """A task's upstream ids, setup/teardown flags, mapping, group, and that its arguments refer
    only to its upstream tasks' results."""
    for j, up in enumerate(task.upstream):
        if up not in seen:
            raise InvalidArgument(f"{where}.upstream[{j}]", f"unknown task id {up!r}")
        if up == task.task_id:
            raise InvalidArgument(f"{where}.upstream[{j}]", "a task cannot depend on itself")
    _check_setup_teardown(where, task)
    check_mapping(where, task)
    if task.group:
        check_id(f"{where}.group", task.group)
    for ref_field, ref in _result_references(f"{where}.python", task.python):
        if ref.task_id not in task.upstream:
            raise InvalidArgument(
                ref_field, f"refers to the result of {ref.task_id!r}, which is not an upstream task"
            )


def _check_params(field: str, owner: pb.DagSpec | pb.TaskSpec) -> None:
    if owner.HasField("params") and owner.params.ByteSize() > MAX_PARAMS_BYTES:
        raise InvalidArgument(field, f"is {owner.params.ByteSize()} bytes; the limit is {MAX_PARAMS_BYTES}")


def _validate_task_options(where: str, task: pb.TaskSpec, pools: dict[str, int] | None) -> None:
    action = task.WhichOneof("action")
    if action is None:
        raise InvalidArgument(f"{where}", "needs an action: shell or python")
    if action == "shell":
        if not task.shell.command.strip():
            raise InvalidArgument(f"{where}.shell.command", "must not be empty")
        if len(task.shell.command.encode()) > MAX_COMMAND_BYTES:
            raise InvalidArgument(f"{where}.shell.command", f"is longer than {MAX_COMMAND_BYTES} bytes")
    if action == "python" and not PYTHON_TARGET.fullmatch(task.python.target):
        raise InvalidArgument(f"{where}.python.target", "must look like 'package.module:function'")
    if task.branch and action != "python":
        raise InvalidArgument(
            f"{where}.branch", "a branch task must be a Python task: it returns the ids to follow"
        )
    if task.transactional and action != "python":
        raise InvalidArgument(f"{where}.transactional", "a transactional task must be a Python task")
    if task.transactional and task.branch:
        raise InvalidArgument(f"{where}.transactional", "a branch task cannot be transactional")
    check_range(f"{where}.max_active_instances", task.max_active_instances, 0, MAX_CONCURRENCY)
    check_range(f"{where}.retries", task.retries, 0, MAX_RETRIES)
    check_range(f"{where}.priority_weight", task.priority_weight, -MAX_PRIORITY_WEIGHT, MAX_PRIORITY_WEIGHT)
    for name in ("retry_delay", "max_retry_delay"):
        check_duration(f"{where}.{name}", getattr(task, name))
    if task.HasField("execution_timeout"):
        check_duration(f"{where}.execution_timeout", task.execution_timeout, positive=True)
    check_range(f"{where}.pool_slots", task.pool_slots, 0, MAX_CONCURRENCY)
    pool = task.pool or "default_pool"
    if task.pool:
        check_id(f"{where}.pool", task.pool)
    if pools is not None:
        if pool not in pools:
            raise InvalidArgument(f"{where}.pool", f"unknown pool {pool!r}")
        if (task.pool_slots or 1) > pools[pool]:
            raise InvalidArgument(
                f"{where}.pool_slots",
                f"needs {task.pool_slots or 1} slots but pool {pool!r} has {pools[pool]}: it could never run",
            )
    if task.queue:
        check_id(f"{where}.queue", task.queue)
    env_bytes = 0
    for key, value in task.env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or len(key) > MAX_ID_CHARS:
            raise InvalidArgument(f"{where}.env", f"{quote(key)} is not a valid environment variable name")
        env_bytes += len(key.encode()) + len(value.encode())
    if env_bytes > MAX_ENV_BYTES:
        raise InvalidArgument(f"{where}.env", f"is {env_bytes} bytes; the limit is {MAX_ENV_BYTES}")
    _check_params(f"{where}.params", task)
    check_callbacks(where, task, ("on_failure", "on_retry", "on_success"))
    check_sensor(where, task)


def _check_setup_teardown(where: str, task: pb.TaskSpec) -> None:
    """Airflow's rules: a task is a setup or a teardown, not both; a teardown's trigger rule is
    ``all_done_setup_success``, and that rule is a teardown's only."""
    if task.setup and task.teardown:
        raise InvalidArgument(f"{where}.teardown", "a task cannot be both a setup and a teardown")
    setup_rule = task.trigger_rule == pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS
    if task.teardown and not setup_rule:
        raise InvalidArgument(
            f"{where}.trigger_rule", "a teardown task's trigger rule is all_done_setup_success"
        )
    if setup_rule and not task.teardown:
        raise InvalidArgument(
            f"{where}.trigger_rule", "all_done_setup_success is the rule of teardown tasks only"
        )


def _result_references(where: str, python: pb.PythonCallable) -> list[tuple[str, pb.ResultReference]]:
    """Every upstream result a Python task's arguments refer to, with its field path."""
    found: list[tuple[str, pb.ResultReference]] = []
    pending: list[tuple[str, pb.Argument]] = [(f"{where}.args[{k}]", a) for k, a in enumerate(python.args)]
    pending += [(f"{where}.kwargs[{quote(k)}]", a) for k, a in sorted(python.kwargs.items())]
    while pending:
        field, arg = pending.pop()
        kind = arg.WhichOneof("value")
        if kind is None:
            raise InvalidArgument(field, "needs a value: literal, result, list or map")
        if kind == "result":
            found.append((f"{field}.result", arg.result))
        elif kind == "list":
            pending += [(f"{field}.list.items[{k}]", a) for k, a in enumerate(arg.list.items)]
        elif kind == "map":
            pending += [(f"{field}.map.fields[{quote(k)}]", a) for k, a in sorted(arg.map.fields.items())]
    return found


def _depth(order: list[str], graph: Mapping[str, set[str]]) -> int:
    level: dict[str, int] = {}
    for node in order:
        level[node] = 1 + max((level[u] for u in graph[node]), default=0)
    return max(level.values(), default=0)
