"""Asset URIs, conditions and watcher settings: normalised, checked naming the field, evaluated."""

from __future__ import annotations

import json

import pytest
from google.protobuf.struct_pb2 import Struct

from schedd.v1 import assets_pb2 as apb, resources_pb2 as pb
from schedd_core.assets import (
    check_extra,
    condition_met,
    normalize_spec_assets,
    normalize_uri,
    spec_assets,
)
from schedd_core.errors import InvalidArgument
from schedd_core.spec import validate_spec
from schedd_scheduler.watcher_config import parse_watchers
from tests.asset_conditions import all_of, any_of, one


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("S3://Bucket/Key", "s3://bucket/Key"),
        ("s3://bucket/", "s3://bucket"),
        ("file:///tmp/data.csv", "file:///tmp/data.csv"),
        ("postgres://db:5432/public/t?x=1", "postgres://db:5432/public/t?x=1"),
    ],
)
def test_uris_are_stored_normalised(given: str, stored: str) -> None:
    assert normalize_uri("uri", given) == stored


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("", "uri: must not be empty"),
        ("orders", "is not a URI: it needs a scheme"),
        ("s3://a b", "contains whitespace or a control character"),
        ("s3://a\x00b", "contains whitespace or a control character"),
        ("s3://user:pw@bucket/k", "must not hold user information"),
        ("s3://bucket/k#frag", "has a fragment"),
        ("s3://", "names nothing after the scheme"),
        ("s3://b/" + "k" * 1500, "the limit is 1500"),
    ],
)
def test_bad_uris_are_refused_naming_the_field(uri: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^uri: ") as caught:
        normalize_uri("uri", uri)
    assert problem in str(caught.value)


def test_an_oversized_or_nul_extra_is_refused() -> None:
    big = Struct()
    big.update({"x": "y" * 70_000})
    with pytest.raises(InvalidArgument, match=r"^extra: is 70008 bytes"):
        check_extra("extra", big)
    nul = Struct()
    nul.update({"x": "a\x00b"})
    with pytest.raises(InvalidArgument, match=r"^extra: must not contain NUL"):
        check_extra("extra", nul)
    ok = Struct()
    ok.update({"rows": 3})
    assert check_extra("extra", ok) == {"rows": 3}


def test_conditions_all_any_and_nested() -> None:
    condition = all_of(one("a://x"), any_of(one("b://x"), all_of(one("c://x"), one("d://x"))))
    assert not condition_met(condition, {"a://x"})
    assert condition_met(condition, {"a://x", "b://x"})
    assert not condition_met(condition, {"a://x", "c://x"})
    assert condition_met(condition, {"a://x", "c://x", "d://x"})
    assert not condition_met(apb.AssetCondition(), {"a://x"})


def spec_with(asset_schedule: apb.AssetCondition | None = None) -> pb.DagSpec:
    return pb.DagSpec(
        dag_id="d",
        tasks=[pb.TaskSpec(task_id="t", shell=pb.ShellCommand(command="true"))],
        asset_schedule=asset_schedule,
    )


@pytest.mark.parametrize(
    ("condition", "field"),
    [
        (apb.AssetCondition(), "spec.asset_schedule: needs one of asset, all or any"),
        (all_of(), "spec.asset_schedule.all: needs at least one condition"),
        (
            any_of(one("a://x"), one("bad")),
            "spec.asset_schedule.any.conditions[1].asset.uri: 'bad' is not a URI",
        ),
    ],
)
def test_a_bad_asset_schedule_is_refused_naming_the_field(condition: apb.AssetCondition, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_spec(spec_with(asset_schedule=condition))
    assert str(caught.value).startswith(field)


def test_conditions_nest_at_most_eight_deep() -> None:
    condition = one("a://x")
    for _ in range(8):
        condition = all_of(condition)
    with pytest.raises(InvalidArgument, match="nests deeper than 8 levels"):
        validate_spec(spec_with(asset_schedule=condition))


def test_outlets_and_inlets_are_normalised_and_listed_by_role() -> None:
    spec = spec_with(asset_schedule=any_of(one("S3://B/a"), one("s3://b/a")))
    spec.tasks[0].outlets.append(apb.AssetRef(uri="S3://B/out", name="out"))
    spec.tasks[0].inlets.append(apb.AssetRef(uri="s3://b/in"))
    normal = normalize_spec_assets(spec)
    assert spec_assets(normal) == [
        ("schedule", "", "s3://b/a", ""),
        ("outlet", "t", "s3://b/out", "out"),
        ("inlet", "t", "s3://b/in", ""),
    ]
    twice = spec_with()
    twice.tasks[0].outlets.extend([apb.AssetRef(uri="s3://b/o"), apb.AssetRef(uri="S3://b/o")])
    with pytest.raises(
        InvalidArgument, match=r"^spec.tasks\[0\].outlets\[1\].uri: 's3://b/o' is named twice"
    ):
        validate_spec(twice)


def test_watchers_are_read_from_json_and_bad_ones_refused_naming_the_entry() -> None:
    good = [
        {
            "name": "s",
            "kind": "redis_stream",
            "url": "redis://h:6379/0",
            "stream": "x",
            "asset": "Redis://H/x",
        },
        {
            "name": "t",
            "kind": "postgres_table",
            "dsn": "postgresql://h/db",
            "table": "public.changes",
            "asset": "pg://h/c",
        },
    ]
    watchers = parse_watchers(json.dumps(good))
    assert [(w.name, w.asset, w.group) for w in watchers] == [
        ("s", "redis://h/x", "schedd"),
        ("t", "pg://h/c", "schedd"),
    ]
    assert parse_watchers("") == ()
    for bad, problem in [
        ("{", "is not JSON"),
        ('{"a": 1}', "must be a JSON list"),
        ('[{"name": "x y", "kind": "redis_stream"}]', "[0].name"),
        ('[{"name": "x", "kind": "kafka"}]', "[0].kind"),
        ('[{"name": "x", "kind": "redis_stream", "asset": "nope"}]', "[0].asset: 'nope' is not a URI"),
        (json.dumps([{**good[1], "table": "t; DROP TABLE dags"}]), "[0].table"),
        (json.dumps([good[0], good[0]]), "same name"),
    ]:
        with pytest.raises(ValueError) as caught:
            parse_watchers(bad)
        assert problem in str(caught.value), (bad, caught.value)
