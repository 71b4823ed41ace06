"""Sensors: ``@task.sensor``, a task that pokes until its condition holds.

::

    from datetime import timedelta
    from schedd_sdk import PokeReturnValue, dag, task

    @task.sensor(poke_interval=timedelta(seconds=30), timeout=timedelta(hours=6), mode="reschedule")
    def partition_landed(table: str) -> PokeReturnValue:
        rows = count_rows(table)
        return PokeReturnValue(is_done=rows > 0, xcom_value=rows)

The function returns True when the condition holds (False: not yet), or a
:class:`PokeReturnValue`, whose ``xcom_value`` becomes the task's result once it is done.

- ``mode="poke"`` (the default) pokes inside one attempt, keeping its worker slot and pool slot.
- ``mode="reschedule"`` ends the attempt after each poke that says "not yet": the task instance
  waits in ``up_for_reschedule`` holding no slot, and its next poke (after ``poke_interval``) is a
  new attempt of the same try (a reschedule is not a failure and uses up no retry).
- ``timeout`` (default 7 days, as in Airflow; None for none) counts from the first poke of a try;
  past it the task fails without retries, or is skipped with ``soft_fail=True``.

Outside a DAG definition, calling a sensor function pokes once and returns its verdict as the
worker reports it: ``{"is_done": bool, "xcom_value": ...}``. ``execution_timeout`` bounds each
poke. Other task options (``retries``, ``pool``, ...) are those of ``@task``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar, Unpack, overload

from schedd.v1 import resources_pb2 as pb
from schedd_sdk.context import current_dag
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.options import Options, TaskOptions, to_duration, to_timedelta
from schedd_sdk.task_functions import TaskFunction, _check_function
from schedd_sdk.tasks import Task, _check_task_id

__all__ = ["PokeReturnValue", "SensorDecorator", "SensorFunction", "SensorMode", "sensor"]

_F = TypeVar("_F", bound=Callable[..., Any])

SensorMode = Literal["poke", "reschedule"]
_MODES: dict[str, pb.SensorMode.ValueType] = {
    "poke": pb.SENSOR_MODE_POKE,
    "reschedule": pb.SENSOR_MODE_RESCHEDULE,
}
#: Airflow's defaults.
DEFAULT_POKE_INTERVAL = timedelta(seconds=60)
DEFAULT_TIMEOUT = timedelta(days=7)


@dataclass(frozen=True)
class PokeReturnValue:
    """What a sensor function may return: whether its condition holds, and its result if so."""

    is_done: bool
    xcom_value: Any = None


def verdict(value: object) -> dict[str, Any]:
    """A sensor function's return value as the worker reports it."""
    if isinstance(value, PokeReturnValue):
        return {"is_done": bool(value.is_done), "xcom_value": value.xcom_value}
    return {"is_done": bool(value), "xcom_value": None}


async def _awaited_verdict(awaitable: Coroutine[Any, Any, object]) -> dict[str, Any]:
    return verdict(await awaitable)


def sensor_spec(
    where: str,
    *,
    mode: object = "poke",
    poke_interval: object = DEFAULT_POKE_INTERVAL,
    timeout: object = DEFAULT_TIMEOUT,
    soft_fail: object = False,
) -> pb.SensorSpec:
    """The spec of a sensor's options, each checked (a bad one raises :class:`DagDefinitionError`)."""
    if not isinstance(mode, str) or mode not in _MODES:
        raise DagDefinitionError(f"{where}: mode must be 'poke' or 'reschedule', not {mode!r}")
    if not isinstance(soft_fail, bool):
        raise DagDefinitionError(f"{where}: soft_fail must be a bool, not {soft_fail!r}")
    spec = pb.SensorSpec(mode=_MODES[mode], soft_fail=soft_fail)
    spec.poke_interval.CopyFrom(to_duration(_positive(where, "poke_interval", poke_interval)))
    if timeout is not None:
        spec.timeout.CopyFrom(to_duration(_positive(where, "timeout", timeout)))
    return spec


def _positive(where: str, name: str, value: object) -> timedelta:
    try:
        delta = to_timedelta(value)
    except (TypeError, ValueError):
        delta = None
    if delta is None or delta <= timedelta(0):
        raise DagDefinitionError(
            f"{where}: {name} must be a positive timedelta or number of seconds, not {value!r}"
        )
    return delta


class SensorFunction(TaskFunction[_F]):
    """A function decorated with ``@task.sensor``: inside a DAG definition, calling it adds a sensor
    task; outside, it pokes once and returns the verdict (``{"is_done": ..., "xcom_value": ...}``)."""

    sensor: pb.SensorSpec

    def __init__(self, function: _F, *, task_id: str | None, options: Options, sensor: pb.SensorSpec) -> None:
        super().__init__(function, task_id=task_id, options=options, branch=False, multiple_outputs=False)
        self.sensor = sensor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_dag() is None:
            result = self.function(*args, **kwargs)
            if inspect.iscoroutine(result):
                return _awaited_verdict(result)
            return verdict(result)
        node = super().__call__(*args, **kwargs)
        assert isinstance(node, Task)
        node.sensor = self.sensor
        return node

    def override(self, *, task_id: str | None = None, **options: Any) -> SensorFunction[_F]:
        """This sensor with some options replaced, for one call: sensor options (``mode``,
        ``poke_interval``, ``timeout``, ``soft_fail``) and task options alike."""
        what = f"{self.function.__qualname__}.override"
        if task_id is not None:
            _check_task_id(task_id, what)
        sensor_options: dict[str, object] = {
            k: options.pop(k) for k in ("mode", "poke_interval", "timeout", "soft_fail") if k in options
        }
        spec = self.sensor
        if sensor_options:
            current = _options_of(self.sensor)
            current.update(sensor_options)
            spec = sensor_spec(what, **current)
        return SensorFunction(
            self.function,
            task_id=task_id or self.task_id,
            options=Options.parse(options, what).over(self.options),
            sensor=spec,
        )

    def __repr__(self) -> str:
        return f"<@task.sensor {self.function.__module__}.{self.function.__qualname__}>"


def _options_of(spec: pb.SensorSpec) -> dict[str, object]:
    mode = next(name for name, value in _MODES.items() if value == (spec.mode or pb.SENSOR_MODE_POKE))
    return {
        "mode": mode,
        "poke_interval": spec.poke_interval.ToTimedelta(),
        "timeout": spec.timeout.ToTimedelta() if spec.HasField("timeout") else None,
        "soft_fail": spec.soft_fail,
    }


class SensorDecorator:
    """``@task.sensor`` and ``@task.sensor(poke_interval=..., timeout=..., mode=..., soft_fail=...)``."""

    @overload
    def __call__(self, function: _F, /) -> SensorFunction[_F]: ...

    @overload
    def __call__(
        self,
        function: None = None,
        /,
        *,
        task_id: str | None = None,
        mode: SensorMode = "poke",
        poke_interval: timedelta | float = DEFAULT_POKE_INTERVAL,
        timeout: timedelta | float | None = DEFAULT_TIMEOUT,
        soft_fail: bool = False,
        **options: Unpack[TaskOptions],
    ) -> Callable[[_F], SensorFunction[_F]]: ...

    def __call__(
        self,
        function: _F | None = None,
        /,
        *,
        task_id: str | None = None,
        mode: SensorMode = "poke",
        poke_interval: timedelta | float = DEFAULT_POKE_INTERVAL,
        timeout: timedelta | float | None = DEFAULT_TIMEOUT,
        soft_fail: bool = False,
        **options: Unpack[TaskOptions],
    ) -> SensorFunction[_F] | Callable[[_F], SensorFunction[_F]]:
        """Make a top-level function a sensor; the options are checked now, the function when it comes.

        Task options (``retries``, ``pool``, ...) are those of ``@task``."""
        kind = "@task.sensor"
        if task_id is not None:
            _check_task_id(task_id, kind)
        spec = sensor_spec(kind, mode=mode, poke_interval=poke_interval, timeout=timeout, soft_fail=soft_fail)
        parsed = Options.parse(options, kind)
        if parsed.transactional:
            raise DagDefinitionError(f"{kind}: a sensor cannot be transactional")

        def decorate(fn: _F) -> SensorFunction[_F]:
            if isinstance(fn, TaskFunction):
                raise DagDefinitionError(f"{kind}: {fn!r} is already a task function")
            _check_function(fn, f"{kind} {getattr(fn, '__qualname__', fn)!r}")
            return SensorFunction(fn, task_id=task_id, options=parsed, sensor=spec)

        if function is None:
            return decorate
        return decorate(function)


#: ``@sensor`` is ``@task.sensor``.
sensor = SensorDecorator()
