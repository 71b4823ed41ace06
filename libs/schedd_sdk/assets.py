"""Assets in Python DAGs, with Airflow 3's names: ``Asset``, ``AssetAll``, ``AssetAny`` and
``AssetOrTimeSchedule``.

A task names the assets it updates with ``outlets=[Asset("s3://lake/orders")]`` (its success records
an event for each) and those it reads with ``inlets=[...]`` (lineage only). A DAG is scheduled on
assets with ``schedule=``:

- ``Asset("s3://lake/orders")``: a run when the asset is updated;
- ``Asset("a://x") & Asset("b://y")`` or ``AssetAll(...)``: once every one of them has been updated;
- ``Asset("a://x") | Asset("b://y")`` or ``AssetAny(...)``: when any of them is; nest them freely;
- ``AssetOrTimeSchedule(timetable=CronTriggerTimetable("0 3 * * *"), assets=Asset("a://x"))``: at the
  timetable's runs and when the assets say (``"daily, or when X is updated"``).

URIs are checked when the DAG is compiled and normalised by the server (docs/scheduling.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import tzinfo

from schedd.v1 import assets_pb2 as apb, resources_pb2 as pb
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.timetables import Timetable

__all__ = ["Asset", "AssetAll", "AssetAny", "AssetOrTimeSchedule"]


class AssetCondition(Timetable):
    """What a DAG can be scheduled on: an asset, or all or any of several conditions."""

    def condition(self) -> apb.AssetCondition:
        raise NotImplementedError

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        spec.asset_schedule.CopyFrom(self.condition())

    def __and__(self, other: AssetCondition) -> AssetAll:
        return AssetAll(self, other)

    def __or__(self, other: AssetCondition) -> AssetAny:
        return AssetAny(self, other)


class Asset(AssetCondition):
    def __init__(self, uri: str, name: str = "") -> None:
        if not isinstance(uri, str) or not uri:
            raise DagDefinitionError(f"Asset: uri must be a non-empty string, got {uri!r}")
        if not isinstance(name, str):
            raise DagDefinitionError(f"Asset {uri!r}: name must be a string, got {name!r}")
        self.uri = uri
        self.name = name

    def ref(self) -> apb.AssetRef:
        return apb.AssetRef(uri=self.uri, name=self.name)

    def condition(self) -> apb.AssetCondition:
        return apb.AssetCondition(asset=self.ref())

    def __repr__(self) -> str:
        return f"Asset({self.uri!r})"


class _Several(AssetCondition):
    kind = ""

    def __init__(self, *conditions: AssetCondition) -> None:
        if not conditions or not all(isinstance(c, AssetCondition) for c in conditions):
            raise DagDefinitionError(
                f"{type(self).__name__}: needs assets or asset conditions, got {conditions!r}"
            )
        self.conditions = conditions

    def condition(self) -> apb.AssetCondition:
        out = apb.AssetCondition()
        getattr(out, self.kind).conditions.extend(c.condition() for c in self.conditions)
        return out


class AssetAll(_Several):
    kind = "all"


class AssetAny(_Several):
    kind = "any"


class AssetOrTimeSchedule(Timetable):
    """Runs at the timetable's times and when the asset condition is met."""

    def __init__(self, *, timetable: Timetable, assets: AssetCondition) -> None:
        if not isinstance(timetable, Timetable) or isinstance(
            timetable, AssetCondition | AssetOrTimeSchedule
        ):
            raise DagDefinitionError(f"AssetOrTimeSchedule: timetable must be a timetable, got {timetable!r}")
        if not isinstance(assets, AssetCondition):
            raise DagDefinitionError(f"AssetOrTimeSchedule: assets must be assets, got {assets!r}")
        self.timetable = timetable
        self.assets = assets
        self.timezone = timetable.timezone

    def apply(self, spec: pb.DagSpec, zone: tzinfo) -> None:
        self.timetable.apply(spec, zone)
        self.assets.apply(spec, zone)


def asset_refs(value: object, where: str) -> tuple[apb.AssetRef, ...] | None:
    """A task's ``outlets`` or ``inlets``: assets (or URI strings)."""
    if value is None:
        return None
    if isinstance(value, str | Asset) or not isinstance(value, Iterable):
        raise DagDefinitionError(f"{where}: expected a list of assets, got {value!r}")
    refs: list[apb.AssetRef] = []
    for item in value:
        if isinstance(item, str):
            item = Asset(item)
        if not isinstance(item, Asset):
            raise DagDefinitionError(f"{where}: expected an Asset or a URI, got {item!r}")
        refs.append(item.ref())
    return tuple(refs)
