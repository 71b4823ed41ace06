"""From a :class:`~schedd_sdk.DAG` to a ``schedd.v1.DagSpec``, and local validation.

Field by field (options that equal their defaults are left unset, which the server reads as
the same default, so the version hash does not depend on how a DAG was written):

===============================  ====================================================
SDK                              spec
===============================  ====================================================
``@task`` function               ``python.target`` = ``module:qualname``
``shell(cmd)``                   ``shell.command``
edges                            ``upstream`` of the downstream task, in declared order
``retries``                      ``retries``
``retry_delay``                  ``retry_delay`` (unset: the server's 300 s)
``retry_exponential_backoff``    ``retry_exponential_backoff``
``max_retry_delay``              ``max_retry_delay``
``execution_timeout``            ``execution_timeout``
``priority_weight`` (1)          ``priority_weight`` (0 = unset = 1)
``weight_rule`` (downstream)     ``weight_rule`` (UNSPECIFIED = downstream)
``pool`` / ``queue``             ``pool`` / ``queue`` ("" = the defaults)
``pool_slots`` (1)               ``pool_slots`` (0 = unset = 1)
``trigger_rule`` (all_success)   ``trigger_rule`` (UNSPECIFIED = all_success)
``params`` / ``env``             ``params`` (Struct) / ``env``
``@task.branch``                 ``branch``
call arguments                   ``python.args`` / ``python.kwargs`` (literals, results)
``partial(...).expand(...)``     ``python.kwargs`` (partial) / ``mapping.expand`` (lists)
``.as_setup()`` / ``@setup``     ``setup``
``.as_teardown()`` / teardown    ``teardown`` (and ``trigger_rule`` all_done_setup_success)
``TaskGroup`` / ``@task_group``  ``group`` (the group's path; ids carry its prefix)
``max_active_instances``         ``max_active_instances``
``transactional``                ``transactional``
``depends_on_past``              ``depends_on_past``
``on_failure/retry/success``     ``on_failure/on_retry/on_success``
``timezone`` ("UTC")             ``timezone`` ("" = UTC)
``schedule`` (str)               ``schedule``
``schedule`` (timedelta)         ``schedule_interval``
``start_date`` / ``end_date``    ``start_date`` / ``end_date`` (Timestamp, UTC)
``dagrun_timeout``               ``dagrun_timeout``
===============================  ====================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, tzinfo
from typing import Any, Protocol

from google.protobuf import timestamp_pb2

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.spec import validate_spec
from schedd_core.triggers import TriggerRule
from schedd_sdk.errors import DagValidationError
from schedd_sdk.options import Callback, WeightRule, to_duration, to_struct
from schedd_sdk.params import check_params
from schedd_sdk.tasks import Task
from schedd_sdk.timetables import Timetable

__all__ = ["CompiledDag", "compile_dag", "validate_compiled"]

_TASK_FIELD = re.compile(r"spec\.tasks\[(\d+)\]")


class CompiledDag(Protocol):
    """What :func:`compile_dag` reads of a DAG (:class:`~schedd_sdk.dags.DAG`, whose attributes these
    are, checked when it was made)."""

    @property
    def dag_id(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def schedule(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def catchup(self) -> bool: ...
    @property
    def allow_undeclared_conf(self) -> bool: ...
    @property
    def max_active_runs(self) -> int: ...
    @property
    def max_active_tasks(self) -> int: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def tasks(self) -> Sequence[Task]: ...
    @property
    def start_date(self) -> datetime | None: ...
    @property
    def end_date(self) -> datetime | None: ...
    @property
    def schedule_interval(self) -> timedelta | None: ...
    @property
    def timetable(self) -> Timetable | None: ...
    @property
    def zone(self) -> tzinfo: ...
    @property
    def dagrun_timeout(self) -> timedelta | None: ...
    @property
    def params(self) -> Mapping[str, Any] | None: ...
    @property
    def param_schemas(self) -> Mapping[str, Any] | None: ...
    @property
    def on_failure(self) -> tuple[Callback, ...]: ...
    @property
    def on_success(self) -> tuple[Callback, ...]: ...


def compile_dag(dag: CompiledDag) -> pb.DagSpec:
    """The spec of ``dag``, not validated."""
    spec = pb.DagSpec(
        dag_id=dag.dag_id,
        description=dag.description,
        schedule=dag.schedule,
        timezone="" if dag.timezone.upper() == "UTC" else dag.timezone,
        catchup=dag.catchup,
        allow_undeclared_conf=dag.allow_undeclared_conf,
        max_active_runs=dag.max_active_runs,
        max_active_tasks=dag.max_active_tasks,
        tags=list(dag.tags),
    )
    spec.tasks.extend(compile_task(t) for t in dag.tasks)
    if dag.start_date is not None:
        spec.start_date.CopyFrom(_timestamp(dag.start_date))
    if dag.end_date is not None:
        spec.end_date.CopyFrom(_timestamp(dag.end_date))
    if dag.schedule_interval is not None:
        spec.schedule_interval.CopyFrom(to_duration(dag.schedule_interval))
    if dag.timetable is not None:
        dag.timetable.apply(spec, dag.zone)
    if dag.dagrun_timeout is not None:
        spec.dagrun_timeout.CopyFrom(to_duration(dag.dagrun_timeout))
    if dag.params is not None:
        spec.params.CopyFrom(to_struct(dag.params))
    if dag.param_schemas is not None:
        spec.param_schemas.CopyFrom(to_struct(dag.param_schemas))
        check_params(dag.dag_id, spec)
    spec.on_failure.extend(_callbacks(dag.on_failure))
    spec.on_success.extend(_callbacks(dag.on_success))
    return spec


def _timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def compile_task(task: Task) -> pb.TaskSpec:
    o = task.options
    spec = pb.TaskSpec(task_id=task.task_id, upstream=list(task.upstream_ids), branch=task.branch)
    if task.command is not None:
        spec.shell.command = task.command
    elif task.target is not None:
        spec.python.target = task.target
        if task.arguments is not None:
            spec.python.args.extend(task.arguments.args)
            for name, argument in task.arguments.kwargs.items():
                spec.python.kwargs[name].CopyFrom(argument)
    if task.mapping is not None:
        spec.mapping.CopyFrom(task.mapping)
    spec.setup = task.setup
    spec.teardown = task.teardown
    if task.sensor is not None:
        spec.sensor.CopyFrom(task.sensor)
    if task.group is not None:
        spec.group = task.group.path
    spec.retries = o.retries or 0
    spec.retry_exponential_backoff = bool(o.retry_exponential_backoff)
    if o.retry_delay is not None:
        spec.retry_delay.CopyFrom(to_duration(o.retry_delay))
    if o.max_retry_delay is not None:
        spec.max_retry_delay.CopyFrom(to_duration(o.max_retry_delay))
    if o.execution_timeout is not None:
        spec.execution_timeout.CopyFrom(to_duration(o.execution_timeout))
    if o.priority_weight is not None and o.priority_weight != 1:
        spec.priority_weight = o.priority_weight
    if o.weight_rule is not None and o.weight_rule is not WeightRule.DOWNSTREAM:
        spec.weight_rule = o.weight_rule.to_proto()
    spec.pool = o.pool or ""
    if o.pool_slots is not None and o.pool_slots != 1:
        spec.pool_slots = o.pool_slots
    spec.queue = o.queue or ""
    if o.trigger_rule is not None and o.trigger_rule is not TriggerRule.ALL_SUCCESS:
        spec.trigger_rule = pb.TriggerRule.Value("TRIGGER_RULE_" + o.trigger_rule.value.upper())
    if o.env:
        spec.env.update(o.env)
    if o.params is not None:
        spec.params.CopyFrom(to_struct(o.params))
    spec.max_active_instances = o.max_active_instances or 0
    spec.transactional = bool(o.transactional)
    spec.depends_on_past = bool(o.depends_on_past)
    spec.on_failure.extend(_callbacks(o.on_failure or ()))
    spec.on_retry.extend(_callbacks(o.on_retry or ()))
    spec.on_success.extend(_callbacks(o.on_success or ()))
    spec.outlets.extend(o.outlets or ())
    spec.inlets.extend(o.inlets or ())
    return spec


def _callbacks(callbacks: tuple[Callback, ...]) -> list[pb.Callback]:
    return [c.to_proto() for c in callbacks]


def validate_compiled(spec: pb.DagSpec) -> None:
    """Run the server's validation (without known pools) and raise :class:`DagValidationError`."""
    try:
        validate_spec(spec)
    except InvalidArgument as exc:
        match = _TASK_FIELD.match(exc.field)
        task_id = None
        if match is not None and int(match.group(1)) < len(spec.tasks):
            task_id = spec.tasks[int(match.group(1))].task_id
        raise DagValidationError(spec.dag_id, exc, task_id) from None
