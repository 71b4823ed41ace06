"""Builders of asset conditions, shared by the tests of assets."""

from __future__ import annotations

from schedd.v1 import assets_pb2 as apb


def one(uri: str) -> apb.AssetCondition:
    return apb.AssetCondition(asset=apb.AssetRef(uri=uri))


def all_of(*members: apb.AssetCondition) -> apb.AssetCondition:
    return apb.AssetCondition(all=apb.AssetConditionList(conditions=members))


def any_of(*members: apb.AssetCondition) -> apb.AssetCondition:
    return apb.AssetCondition(any=apb.AssetConditionList(conditions=members))
