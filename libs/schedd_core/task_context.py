"""The task context: what a running task knows about itself and its run, by Airflow's names.

A Python task function receives, as keyword arguments, the names of :data:`CONTEXT_NAMES` it
declares and its call does not supply (``def load(rows, ds, ti, params)``); ``**kwargs`` receives
them all. ``get_current_context()`` returns the whole :class:`TaskContext` from anywhere inside the
running task. The values come from the attempt's environment (the ``SCHEDD_*`` variables the
worker sets, ``schedd_exec.assignments.attempt_env``) and its resolved params:

============================  ==========================================================================
``dag_id``, ``task_id``,      ``str``: ``SCHEDD_DAG_ID``, ``SCHEDD_TASK_ID``, ``SCHEDD_RUN_ID``
``run_id``
``logical_date``              aware ``datetime`` in UTC (``SCHEDD_LOGICAL_DATE``)
``ds``, ``ds_nodash``         ``str``: the logical date's UTC date, ``YYYY-MM-DD`` and ``YYYYMMDD``
``ts``, ``ts_nodash``         ``str``: the logical date, ISO 8601 (``2025-01-02T00:00:00+00:00``) and
                              ``YYYYMMDDTHHMMSS``
``data_interval_start``,      aware ``datetime`` in UTC for a scheduled or backfill run; ``None`` for a
``data_interval_end``         manual run, which has no data interval
``map_index``                 ``int``: the instance of a mapped task, -1 for a task that is not mapped
``try_number``                ``int``: 1 for the first try; a reschedule-mode sensor's pokes share one
``ti``                        :class:`TaskInstanceInfo`
``dag_run``                   :class:`DagRunInfo` (``conf``: the run's conf, ``{}`` when it has none)
``params``                    ``dict``: the DAG's params, the task's on top, the run's conf on top
============================  ==========================================================================

Guaranteed: every name has a value in every attempt a worker (or ``schedctl dags test``) runs;
values are computed only for the names a task asks for, and ``dag_run.conf`` is parsed only when it
is read (anew at each read: changing the dict changes nothing else). Not guaranteed: that two
attempts of one task see the same ``try_number`` or ``attempt_id`` (``ti.idempotency_key`` is the
same for all of them). Outside a task attempt (a callback, a plain call) there is no context, and
:func:`get_current_context` raises :class:`NoTaskContext`.

Only ``json``, ``datetime``, ``functools`` and ``typing`` are imported, so the worker's warm children
pay next to nothing for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, NamedTuple, TypedDict, cast

__all__ = [
    "CONTEXT_NAMES",
    "DagRunInfo",
    "NoTaskContext",
    "RunningTask",
    "TaskContext",
    "TaskInstanceInfo",
    "get_current_context",
]

#: The environment variable holding the run's conf as a JSON object (absent when the conf is empty).
CONF_ENV = "SCHEDD_RUN_CONF"

#: The variables every task attempt's environment holds; without them there is no task context.
REQUIRED_ENV = (
    "SCHEDD_DAG_ID",
    "SCHEDD_RUN_ID",
    "SCHEDD_RUN_TYPE",
    "SCHEDD_TASK_ID",
    "SCHEDD_TRY_NUMBER",
    "SCHEDD_ATTEMPT_ID",
    "SCHEDD_LOGICAL_DATE",
    "SCHEDD_IDEMPOTENCY_KEY",
)


class TaskInstanceInfo(NamedTuple):
    """The running task instance (Airflow's ``ti``): which task of which run, and which attempt."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int
    #: the instance of a mapped task; -1 for a task that is not mapped
    map_index: int
    #: unique per attempt (a retry, or a re-run after a lost worker, has a new one)
    attempt_id: str
    #: the same for every attempt of this task instance: ``dag/run/task`` (``task[i]`` when mapped)
    idempotency_key: str


class DagRunInfo(NamedTuple):
    """The run the task belongs to (Airflow's ``dag_run``)."""

    dag_id: str
    run_id: str
    #: ``manual``, ``scheduled`` or ``backfill``
    run_type: str
    logical_date: datetime
    #: None for a manual run
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    #: the run's conf as JSON text ("" for none); read it as :attr:`conf`
    conf_json: str = ""

    @property
    def conf(self) -> dict[str, Any]:
        """The run's conf as it was triggered (``{}`` when it has none), parsed anew at each read."""
        value = json.loads(self.conf_json) if self.conf_json else {}
        return value if isinstance(value, dict) else {}


class TaskContext(TypedDict):
    """What ``get_current_context()`` returns (see the module's table)."""

    dag_id: str
    task_id: str
    run_id: str
    logical_date: datetime
    ds: str
    ds_nodash: str
    ts: str
    ts_nodash: str
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    map_index: int
    try_number: int
    ti: TaskInstanceInfo
    dag_run: DagRunInfo
    params: dict[str, Any]


#: Every name of the task context, in the order of :class:`TaskContext`.
CONTEXT_NAMES: tuple[str, ...] = tuple(TaskContext.__annotations__)


class NoTaskContext(RuntimeError):
    """There is no task context here: not inside a running task attempt."""


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).astimezone(UTC)


class RunningTask:
    """The context of one task attempt, computed name by name from its environment on demand."""

    def __init__(self, env: Mapping[str, str], params: dict[str, Any]) -> None:
        self.env = env
        self.params = params

    @classmethod
    def from_environment(cls, env: Mapping[str, str], params: dict[str, Any]) -> RunningTask | None:
        """The attempt's context, or None when ``env`` is not a task attempt's (a callback's)."""
        return cls(env, params) if all(name in env for name in REQUIRED_ENV) else None

    @cached_property
    def logical_date(self) -> datetime:
        return _moment(self.env["SCHEDD_LOGICAL_DATE"])

    @cached_property
    def data_interval(self) -> tuple[datetime | None, datetime | None]:
        start, end = self.env.get("SCHEDD_DATA_INTERVAL_START"), self.env.get("SCHEDD_DATA_INTERVAL_END")
        if not start or not end:
            return None, None
        return _moment(start), _moment(end)

    @cached_property
    def map_index(self) -> int:
        raw = self.env.get("SCHEDD_MAP_INDEX", "")
        return int(raw) if raw else -1

    @cached_property
    def ti(self) -> TaskInstanceInfo:
        env = self.env
        return TaskInstanceInfo(
            dag_id=env["SCHEDD_DAG_ID"],
            task_id=env["SCHEDD_TASK_ID"],
            run_id=env["SCHEDD_RUN_ID"],
            try_number=int(env["SCHEDD_TRY_NUMBER"]),
            map_index=self.map_index,
            attempt_id=env["SCHEDD_ATTEMPT_ID"],
            idempotency_key=env["SCHEDD_IDEMPOTENCY_KEY"],
        )

    @cached_property
    def dag_run(self) -> DagRunInfo:
        env = self.env
        start, end = self.data_interval
        return DagRunInfo(
            dag_id=env["SCHEDD_DAG_ID"],
            run_id=env["SCHEDD_RUN_ID"],
            run_type=env["SCHEDD_RUN_TYPE"],
            logical_date=self.logical_date,
            data_interval_start=start,
            data_interval_end=end,
            conf_json=env.get(CONF_ENV, ""),
        )

    def value(self, name: str) -> Any:
        """The value of context name ``name`` (one of :data:`CONTEXT_NAMES`)."""
        if name in ("dag_id", "task_id", "run_id"):
            return self.env[f"SCHEDD_{name.upper()}"]
        if name == "try_number":
            return int(self.env["SCHEDD_TRY_NUMBER"])
        if name in ("ds", "ds_nodash", "ts", "ts_nodash"):
            return _date_text(name, self.logical_date)
        if name == "data_interval_start":
            return self.data_interval[0]
        if name == "data_interval_end":
            return self.data_interval[1]
        if name == "params":
            return self.params
        if name in ("logical_date", "map_index", "ti", "dag_run"):
            return getattr(self, name)
        raise KeyError(name)

    def context(self) -> TaskContext:
        """Every name of the context."""
        return cast(TaskContext, {name: self.value(name) for name in CONTEXT_NAMES})


def _date_text(name: str, moment: datetime) -> str:
    if name == "ds":
        return moment.strftime("%Y-%m-%d")
    if name == "ds_nodash":
        return moment.strftime("%Y%m%d")
    if name == "ts":
        return moment.isoformat()
    return moment.strftime("%Y%m%dT%H%M%S")


_current: RunningTask | None = None


def enter(task: RunningTask | None) -> None:
    """Make ``task`` the current task of this process (the worker's child, while it runs it)."""
    global _current
    _current = task


def leave() -> None:
    """No task runs in this process any more."""
    enter(None)


def get_current_context() -> TaskContext:
    """The context of the task attempt running in this process, from any thread of it.

    Raises :class:`NoTaskContext` outside a running task attempt: at import time, while a DAG is
    defined, in a callback, in a plain call of a task function, or after the task returned.
    """
    task = _current
    if task is None:
        raise NoTaskContext(
            "get_current_context() was called outside a running task: the task context exists only "
            "while a worker (or schedctl dags test) runs a task attempt"
        )
    return task.context()
