"""DAGs: the :class:`DAG` object, its ``with`` form and the ``@dag`` decorator.

Two ways to declare a DAG, with the same result::

    @dag(schedule="@daily", default_args={"retries": 2})
    def etl():
        "Extract, transform, load."          # the docstring is the description
        load(transform(extract()))

    etl_dag = etl()                         # a DAG; the loader also calls module-level @dag functions

    with DAG("etl", schedule="@daily") as etl_dag:
        load(transform(extract()))

Guaranteed: :meth:`DAG.to_spec` returns the typed ``schedd.v1.DagSpec`` with tasks in definition
order and upstream ids in the order the edges were declared, and it has passed the server's
validation (``schedd_core.spec.validate_spec``, without the list of pools, which only the server
knows). Building the same DAG twice gives equal specs, hence the same version hash.

Not guaranteed: that the server accepts the DAG's pools (checked at registration), that workers
can import the Python tasks' modules (see :mod:`schedd_sdk.targets`), or that the schedule is a
valid cron expression (the server checks it).

Options equal to their defaults are written as unset fields (``priority_weight`` 1,
``pool_slots`` 1, ``weight_rule`` downstream, ``trigger_rule`` all_success, ``timezone`` UTC), so a
DAG written with the SDK and the same DAG written in YAML have the same version hash.
"""

from __future__ import annotations

import inspect
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from contextvars import Token
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from types import TracebackType
from typing import Any, overload

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.identifiers import check_id
from schedd_sdk import context
from schedd_sdk.compile import compile_dag, validate_compiled
from schedd_sdk.deadlines import DeadlineAlert
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.groups import TaskGroup
from schedd_sdk.options import Callback, Callbacks, Checker, DurationLike, Options
from schedd_sdk.params import split_params
from schedd_sdk.protocols import DagNode, GroupNode, TaskNode
from schedd_sdk.tasks import Task
from schedd_sdk.timetables import Timetable

__all__ = ["DAG", "DagFunction", "dag"]


class DAG:
    """A DAG being defined: its settings and its tasks, in definition order.

    Use it as a context manager (``with DAG("id") as d:``) or through ``@dag``. ``default_args``
    holds task options (the keys of :class:`~schedd_sdk.options.TaskOptions`) that apply to every
    task of the DAG that does not set them itself; an unknown key is an error (schedd does not
    silently ignore Airflow options it does not have, such as ``owner``).

    ``schedule`` is a cron expression or preset (``"@daily"``, ``"0 3 * * *"``, read in the DAG's
    ``timezone``; data intervals or trigger semantics as the deployment says), ``"@once"``,
    ``"@continuous"``, a ``timedelta`` (data intervals of a fixed duration from the start date) or
    a timetable object (:mod:`schedd_sdk.timetables`, Airflow's names); None or "" means manual
    runs only. A timetable's ``timezone`` becomes the DAG's. A scheduled DAG needs a ``start_date``
    (a naive one is read in the DAG's ``timezone``); no run comes after ``end_date``. ``catchup``
    makes every missed run happen, not only the latest. ``dagrun_timeout`` is a timedelta or seconds. A task's
    ``params`` are the DAG's ``params``, then the task's on top, then the run's conf on top. A run's
    conf may set only the params the DAG or its tasks declare unless ``allow_undeclared_conf``.
    """

    def __init__(
        self,
        dag_id: str,
        *,
        description: str | None = None,
        schedule: str | timedelta | Timetable | None = None,
        timezone: str = "UTC",
        start_date: datetime | date | None = None,
        end_date: datetime | date | None = None,
        catchup: bool = False,
        max_active_runs: int = 0,
        max_active_tasks: int = 0,
        dagrun_timeout: DurationLike | None = None,
        tags: Iterable[str] = (),
        params: Mapping[str, Any] | None = None,
        on_failure: Callbacks | None = None,
        on_success: Callbacks | None = None,
        default_args: Mapping[str, Any] | None = None,
        allow_undeclared_conf: bool = False,
        deadline: DeadlineAlert | None = None,
    ) -> None:
        where = f"DAG {dag_id!r}"
        if not isinstance(dag_id, str):
            raise DagDefinitionError(f"DAG: dag_id must be a string, got {dag_id!r}")
        try:
            check_id("dag_id", dag_id)
        except InvalidArgument as exc:
            raise DagDefinitionError(f"{where}: {exc}") from None
        params, self.param_schemas = split_params(params)
        check = Checker(
            {
                "description": description,
                "schedule": None if isinstance(schedule, timedelta | Timetable) else schedule,
                "timezone": timezone,
                "catchup": catchup,
                "allow_undeclared_conf": allow_undeclared_conf,
                "max_active_runs": max_active_runs,
                "max_active_tasks": max_active_tasks,
                "dagrun_timeout": dagrun_timeout,
                "params": params,
                "on_failure": on_failure,
                "on_success": on_success,
            },
            where,
        )
        self.dag_id = dag_id
        self.description = check.string("description") or ""
        self.schedule = check.string("schedule") or ""
        self.schedule_interval: timedelta | None = schedule if isinstance(schedule, timedelta) else None
        self.timetable: Timetable | None = schedule if isinstance(schedule, Timetable) else None
        self.timezone = _timetable_zone(self.timetable, check.string("timezone") or "UTC", where)
        self.catchup = bool(check.boolean("catchup"))
        self.allow_undeclared_conf = bool(check.boolean("allow_undeclared_conf"))
        self.max_active_runs = check.integer("max_active_runs") or 0
        self.max_active_tasks = check.integer("max_active_tasks") or 0
        self.dagrun_timeout: timedelta | None = check.duration("dagrun_timeout")
        if self.dagrun_timeout is not None and self.dagrun_timeout <= timedelta(0):
            raise DagDefinitionError(f"{where}: dagrun_timeout must be positive, got {self.dagrun_timeout}")
        self.params: Mapping[str, Any] | None = check.json_mapping("params")
        self.on_failure: tuple[Callback, ...] = check.callbacks("on_failure") or ()
        self.on_success: tuple[Callback, ...] = check.callbacks("on_success") or ()
        if deadline is not None and not isinstance(deadline, DeadlineAlert):
            raise DagDefinitionError(f"{where}: deadline must be a DeadlineAlert, got {deadline!r}")
        self.deadline = deadline
        if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
            raise DagDefinitionError(f"{where}: tags must be an iterable of strings, got {tags!r}")
        self.tags: tuple[str, ...] = tuple(dict.fromkeys(tags))
        self.zone = _zone(self.timezone, where)
        self.start_date = _start_date(start_date, self.zone, where)
        self.end_date = _start_date(end_date, self.zone, where, "end_date")
        if default_args is not None and not isinstance(default_args, Mapping):
            raise DagDefinitionError(f"{where}: default_args must be a mapping, got {default_args!r}")
        self.default_args: Mapping[str, Any] = dict(default_args or {})
        #: ``default_args`` checked; the base of every task's options.
        self.default_options = Options.parse(self.default_args, f"{where}: default_args")
        self._tasks: dict[str, Task] = {}
        self._groups: dict[str, TaskGroup] = {}
        self._tokens: list[Token[DagNode | None]] = []
        #: The ``@dag`` function that built this DAG, if any.
        self.built_by: DagFunction | None = None

    # --- tasks ------------------------------------------------------------------------------------

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks, in definition order."""
        return tuple(self._tasks.values())

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(self._tasks)

    def get_task(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise KeyError(f"DAG {self.dag_id!r} has no task {task_id!r}") from None

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def add_task(self, task: TaskNode) -> None:
        """Register a new task (called by :class:`Task`, the only kind of task); its id must be new."""
        if not isinstance(task, Task):
            raise TypeError(f"DAG {self.dag_id!r}: a task is a schedd_sdk Task, got {task!r}")
        if task.task_id in self._tasks:
            raise DagDefinitionError(
                f"DAG {self.dag_id!r} already has a task {task.task_id!r}: task ids must be unique"
            )
        self._tasks[task.task_id] = task

    @property
    def groups(self) -> tuple[TaskGroup, ...]:
        """The task groups, in definition order."""
        return tuple(self._groups.values())

    def add_group(self, group: GroupNode) -> None:
        """Register a new task group (called by :class:`~schedd_sdk.groups.TaskGroup`); its path is new."""
        if not isinstance(group, TaskGroup):
            raise TypeError(f"DAG {self.dag_id!r}: a task group is a schedd_sdk TaskGroup, got {group!r}")
        if group.path in self._groups:
            raise DagDefinitionError(
                f"DAG {self.dag_id!r} already has a task group {group.path!r}: group ids must be unique"
            )
        self._groups[group.path] = group

    def unique_task_id(self, base: str) -> str:
        """``base`` if unused, else ``base__1``, ``base__2``, ... (Airflow's rule for TaskFlow ids)."""
        if base not in self._tasks:
            return base
        n = 1
        while f"{base}__{n}" in self._tasks:
            n += 1
        return f"{base}__{n}"

    # --- definition context -------------------------------------------------------------------------

    def __enter__(self) -> DAG:
        self._tokens.append(context.enter(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        context.leave(self._tokens.pop())

    # --- spec -----------------------------------------------------------------------------------------

    def to_spec(self, *, validate: bool = True) -> pb.DagSpec:
        """The typed spec of this DAG; validated like the server does unless ``validate`` is False.

        Raises :class:`~schedd_sdk.errors.DagValidationError` naming the field (and the task).
        """
        spec = compile_dag(self)
        if self.deadline is not None:
            spec.deadline.CopyFrom(self.deadline.to_proto())
        if validate:
            validate_compiled(spec)
        return spec

    def __repr__(self) -> str:
        return f"<DAG {self.dag_id!r}: {len(self._tasks)} tasks>"


def _timetable_zone(timetable: Timetable | None, timezone: str, where: str) -> str:
    """The DAG's zone: the timetable's when it names one (a different non-UTC ``timezone`` is an error)."""
    if timetable is None or timetable.timezone is None or timetable.timezone == timezone:
        return timezone
    if timezone.upper() != "UTC":
        raise DagDefinitionError(
            f"{where}: timezone {timezone!r} differs from the schedule's {timetable.timezone!r}"
        )
    return timetable.timezone


def _zone(name: str, where: str) -> tzinfo:
    if name.upper() == "UTC":
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        if not zoneinfo.available_timezones():  # no time zone database here: the server will check it
            return UTC
        raise DagDefinitionError(f"{where}: timezone {name!r} is not an IANA time zone") from None


def _start_date(value: object, zone: tzinfo, where: str, name: str = "start_date") -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=zone)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=zone)
    raise DagDefinitionError(f"{where}: {name} must be a datetime or a date, got {value!r}")


class DagFunction:
    """A function decorated with ``@dag``: each call builds a new :class:`DAG` by running the
    function's body as the DAG's definition. Arguments of the call are passed to the body."""

    def __init__(self, function: Callable[..., object], dag_id: str, settings: Mapping[str, Any]) -> None:
        self.function = function
        self.dag_id = dag_id
        self.settings = dict(settings)
        DAG(dag_id, **self.settings)  # check the settings now, where the decorator is
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", dag_id)
        self.__qualname__ = getattr(function, "__qualname__", dag_id)
        self.__module__ = function.__module__
        self.__wrapped__ = function

    def __call__(self, *args: Any, **kwargs: Any) -> DAG:
        built = DAG(self.dag_id, **self.settings)
        built.built_by = self
        with built:
            self.function(*args, **kwargs)
        return built

    def __repr__(self) -> str:
        return f"<@dag {self.__module__}.{self.__qualname__} ({self.dag_id!r})>"


@overload
def dag(function: Callable[..., object], /) -> DagFunction: ...


@overload
def dag(
    function: None = None,
    /,
    *,
    dag_id: str | None = None,
    schedule: str | timedelta | Timetable | None = None,
    timezone: str = "UTC",
    start_date: datetime | date | None = None,
    end_date: datetime | date | None = None,
    catchup: bool = False,
    max_active_runs: int = 0,
    max_active_tasks: int = 0,
    dagrun_timeout: DurationLike | None = None,
    tags: Iterable[str] = (),
    params: Mapping[str, Any] | None = None,
    description: str | None = None,
    on_failure: Callbacks | None = None,
    on_success: Callbacks | None = None,
    default_args: Mapping[str, Any] | None = None,
    allow_undeclared_conf: bool = False,
) -> Callable[[Callable[..., object]], DagFunction]: ...


def dag(
    function: Callable[..., object] | None = None,
    /,
    *,
    dag_id: str | None = None,
    schedule: str | timedelta | Timetable | None = None,
    timezone: str = "UTC",
    start_date: datetime | date | None = None,
    end_date: datetime | date | None = None,
    catchup: bool = False,
    max_active_runs: int = 0,
    max_active_tasks: int = 0,
    dagrun_timeout: DurationLike | None = None,
    tags: Iterable[str] = (),
    params: Mapping[str, Any] | None = None,
    description: str | None = None,
    on_failure: Callbacks | None = None,
    on_success: Callbacks | None = None,
    default_args: Mapping[str, Any] | None = None,
    allow_undeclared_conf: bool = False,
) -> DagFunction | Callable[[Callable[..., object]], DagFunction]:
    """Make a function a DAG factory: its body declares the tasks; calling it builds the DAG.

    ``dag_id`` defaults to the function's name and ``description`` to its docstring. The other
    arguments are those of :class:`DAG`.
    """
    settings: dict[str, Any] = {
        "schedule": schedule,
        "timezone": timezone,
        "start_date": start_date,
        "end_date": end_date,
        "catchup": catchup,
        "max_active_runs": max_active_runs,
        "max_active_tasks": max_active_tasks,
        "dagrun_timeout": dagrun_timeout,
        "tags": tuple(tags) if not isinstance(tags, str) else tags,
        "params": params,
        "on_failure": on_failure,
        "on_success": on_success,
        "default_args": default_args,
        "allow_undeclared_conf": allow_undeclared_conf,
    }

    def decorate(fn: Callable[..., object]) -> DagFunction:
        if not callable(fn):
            raise DagDefinitionError(f"@dag: expected a function, got {fn!r}")
        doc = inspect.getdoc(fn)
        return DagFunction(
            fn,
            dag_id if dag_id is not None else getattr(fn, "__name__", ""),
            {**settings, "description": description if description is not None else (doc or "")},
        )

    if function is None:
        return decorate
    return decorate(function)
