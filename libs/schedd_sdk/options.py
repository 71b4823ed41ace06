"""Task and DAG options: their accepted Python values and how they become spec fields.

Options are given as keyword arguments (``@task(retries=3)``, ``shell(..., pool="db")``,
``default_args={"retries": 3}``) and checked here for their *type*: a wrong type or an unknown
option name raises :class:`~schedd_sdk.errors.DagDefinitionError` at once. Value rules that the
server enforces (non-negative retries, a valid pool id, ...) are checked by the server's own
validator when the spec is built (:meth:`schedd_sdk.DAG.to_spec`), so the SDK never disagrees
with the server about what is valid.

``None`` means "not given": the DAG's ``default_args`` apply, then the built-in default. A value
given on the task replaces the ``default_args`` value as a whole (``params``, ``env`` and the
callback lists are not merged).

Durations are a :class:`datetime.timedelta` or a number of seconds. Trigger and weight rules are
the enums or their lower-case names (``"one_failed"``). Callbacks are :class:`Callback` values
or top-level functions (named by their import path).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any, TypedDict, TypeVar

from google.protobuf import duration_pb2, struct_pb2

from schedd.v1 import assets_pb2 as apb, resources_pb2 as pb
from schedd_core.triggers import TriggerRule
from schedd_sdk.assets import Asset, asset_refs
from schedd_sdk.callbacks import Callback as Callback, CallbackLike as CallbackLike, Callbacks as Callbacks
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.targets import import_path

__all__ = [
    "Callback",
    "CallbackLike",
    "Callbacks",
    "DurationLike",
    "Options",
    "TaskOptions",
    "TriggerRule",
    "WeightRule",
]

DurationLike = timedelta | int | float
_E = TypeVar("_E", bound=enum.StrEnum)
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", re.ASCII)


class WeightRule(enum.StrEnum):
    """How a task's effective priority is derived (Airflow's weight rules).

    ``downstream`` (the default): own weight plus the weights of all downstream tasks;
    ``upstream``: own weight plus all upstream tasks; ``absolute``: own weight only.
    """

    DOWNSTREAM = "downstream"
    UPSTREAM = "upstream"
    ABSOLUTE = "absolute"

    def to_proto(self) -> pb.WeightRule.ValueType:
        return pb.WeightRule.Value("WEIGHT_RULE_" + self.value.upper())


class TaskOptions(TypedDict, total=False):
    """The options of a task, as keyword arguments of ``@task``, ``shell`` and ``default_args``.

    Defaults (when neither the task nor ``default_args`` give one): ``retries`` 0, ``retry_delay``
    the server's (300 s, as Airflow), no backoff, no cap, no timeout, ``priority_weight`` 1,
    ``weight_rule`` downstream, the default pool with 1 slot, the default queue, ``trigger_rule``
    all_success, no params or env, no instance limit, no callbacks, not ``depends_on_past`` (a task
    with it runs only once the same task of the DAG's previous run, by logical date, succeeded or
    was skipped).
    """

    retries: int | None
    retry_delay: DurationLike | None
    retry_exponential_backoff: bool | None
    max_retry_delay: DurationLike | None
    execution_timeout: DurationLike | None
    priority_weight: int | None
    weight_rule: WeightRule | str | None
    pool: str | None
    pool_slots: int | None
    queue: str | None
    trigger_rule: TriggerRule | str | None
    params: Mapping[str, Any] | None
    env: Mapping[str, str] | None
    max_active_instances: int | None
    transactional: bool | None
    depends_on_past: bool | None
    on_failure: Callbacks | None
    on_retry: Callbacks | None
    on_success: Callbacks | None
    outlets: Iterable[Asset | str] | None
    inlets: Iterable[Asset | str] | None


@dataclass(frozen=True)
class Options:
    """Checked task options; ``None`` (or an empty tuple of callbacks) where not given."""

    retries: int | None = None
    retry_delay: timedelta | None = None
    retry_exponential_backoff: bool | None = None
    max_retry_delay: timedelta | None = None
    execution_timeout: timedelta | None = None
    priority_weight: int | None = None
    weight_rule: WeightRule | None = None
    pool: str | None = None
    pool_slots: int | None = None
    queue: str | None = None
    trigger_rule: TriggerRule | None = None
    params: Mapping[str, Any] | None = None
    env: Mapping[str, str] | None = None
    max_active_instances: int | None = None
    transactional: bool | None = None
    depends_on_past: bool | None = None
    on_failure: tuple[Callback, ...] | None = None
    on_retry: tuple[Callback, ...] | None = None
    on_success: tuple[Callback, ...] | None = None
    outlets: tuple[apb.AssetRef, ...] | None = None
    inlets: tuple[apb.AssetRef, ...] | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, object], where: str) -> Options:
        """Check option values given as keyword arguments; ``where`` prefixes error messages."""
        unknown = sorted(set(raw) - OPTION_NAMES)
        if unknown:
            raise DagDefinitionError(
                f"{where}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                f"the task options are {', '.join(sorted(OPTION_NAMES))}"
            )
        p = Checker(raw, where)
        return cls(
            retries=p.integer("retries"),
            retry_delay=p.duration("retry_delay"),
            retry_exponential_backoff=p.boolean("retry_exponential_backoff"),
            max_retry_delay=p.duration("max_retry_delay"),
            execution_timeout=p.duration("execution_timeout"),
            priority_weight=p.integer("priority_weight"),
            weight_rule=p.choice("weight_rule", WeightRule),
            pool=p.string("pool"),
            pool_slots=p.integer("pool_slots"),
            queue=p.string("queue"),
            trigger_rule=p.choice("trigger_rule", TriggerRule),
            params=p.json_mapping("params"),
            env=p.env("env"),
            max_active_instances=p.integer("max_active_instances"),
            transactional=p.boolean("transactional"),
            depends_on_past=p.boolean("depends_on_past"),
            on_failure=p.callbacks("on_failure"),
            on_retry=p.callbacks("on_retry"),
            on_success=p.callbacks("on_success"),
            outlets=asset_refs(raw.get("outlets"), f"{where}: outlets"),
            inlets=asset_refs(raw.get("inlets"), f"{where}: inlets"),
        )

    def over(self, base: Options) -> Options:
        """These options, with ``base``'s value for every option not given here."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in values.items():
            if value is None:
                values[name] = getattr(base, name)
        return Options(**values)


OPTION_NAMES = frozenset(TaskOptions.__annotations__)


class Checker:
    """Type checks of keyword options; errors name ``where`` and the option."""

    def __init__(self, raw: Mapping[str, object], where: str) -> None:
        self.raw = raw
        self.where = where

    def _get(self, name: str) -> object:
        return self.raw.get(name)

    def _bad(self, name: str, expected: str, value: object) -> DagDefinitionError:
        return DagDefinitionError(
            f"{self.where}: option {name} must be {expected}, got {value!r} ({type(value).__name__})"
        )

    def integer(self, name: str) -> int | None:
        value = self._get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(name, "an int", value)
        return value

    def boolean(self, name: str) -> bool | None:
        value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._bad(name, "True or False", value)
        return value

    def string(self, name: str) -> str | None:
        value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._bad(name, "a string", value)
        return value

    def duration(self, name: str) -> timedelta | None:
        value = self._get(name)
        if value is None:
            return None
        try:
            return to_timedelta(value)
        except (TypeError, ValueError):
            raise self._bad(name, "a timedelta or a number of seconds", value) from None

    def choice(self, name: str, kind: type[_E]) -> _E | None:
        value = self._get(name)
        if value is None:
            return None
        if isinstance(value, kind):
            return value
        if isinstance(value, str):
            try:
                return kind(value.lower())
            except ValueError:
                pass
        choices = ", ".join(repr(m.value) for m in kind)
        raise DagDefinitionError(f"{self.where}: option {name} must be one of {choices}, got {value!r}")

    def json_mapping(self, name: str) -> Mapping[str, Any] | None:
        value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._bad(name, "a mapping", value)
        try:
            to_struct(value)
        except (TypeError, ValueError) as exc:
            raise DagDefinitionError(
                f"{self.where}: option {name} must hold JSON values (str, number, bool, None, list, dict "
                f"with str keys): {exc}"
            ) from None
        return dict(value)

    def env(self, name: str) -> Mapping[str, str] | None:
        value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._bad(name, "a mapping of str to str", value)
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise DagDefinitionError(
                    f"{self.where}: option {name} must map str to str; {key!r} maps to {item!r} "
                    f"({type(item).__name__}): environment values are strings, convert it with str()"
                )
        return dict(value)

    def callbacks(self, name: str) -> tuple[Callback, ...] | None:
        value = self._get(name)
        if value is None:
            return None
        items = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        return tuple(to_callback(item, f"{self.where}: option {name}") for item in items)


def to_callback(value: object, where: str) -> Callback:
    """A :class:`Callback` from a Callback or a top-level function."""
    if isinstance(value, Callback):
        return value
    if isinstance(value, str):
        raise DagDefinitionError(
            f"{where}: {value!r} is a string; say what it is with Callback.python('pkg.mod:func') or "
            "Callback.webhook('https://...')"
        )
    if callable(value):
        return Callback("python", import_path(value, what="callback"))
    raise DagDefinitionError(
        f"{where}: expected a Callback or a function, got {value!r} ({type(value).__name__})"
    )


def to_timedelta(value: object) -> timedelta:
    """A timedelta from a timedelta or a finite number of seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a timedelta or seconds, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError("must be finite")
    return timedelta(seconds=value)


def to_duration(value: timedelta) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(value)
    return duration


def to_struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    """A protobuf Struct of a JSON-like mapping (numbers become doubles, as in any Struct)."""
    _check_json(value, "")
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def to_list_value(values: Sequence[Any]) -> struct_pb2.Value:
    """A protobuf Value holding the list of JSON-like ``values`` (a tuple becomes a list, as in JSON).

    Raises TypeError or ValueError naming the first element that is not JSON (``[2]``, ``[0].key``)."""
    _check_json(list(values), "")
    value = struct_pb2.Value()
    value.list_value.SetInParent()  # an empty list is a list too
    value.list_value.extend(values)
    return value


def _check_json(value: object, path: str) -> None:
    if value is None or isinstance(value, str | bool | int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{path or 'value'} is {value}, which JSON cannot represent")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"key {key!r} at {path or 'the top level'} is not a string")
            _check_json(item, f"{path}.{key}" if path else key)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    raise TypeError(f"{path or 'value'} is a {type(value).__name__}, which is not a JSON value")
