"""Assets: URIs that name data, checked and normalised, and conditions on their events.

An asset is named by a URI ``scheme://rest``. :func:`normalize_uri` refuses what cannot name one
(no scheme, whitespace, control characters, NUL, user information such as ``user:password@``, a
fragment, more than :data:`MAX_URI_CHARS` characters) with :class:`InvalidArgument` naming the
field, and returns the stored form: scheme and host lowercase, no ``/`` alone after the host. Two
spellings of one URI therefore name one asset; two different URIs are never merged (the path and
query are kept as written, case included).

A DAG's ``asset_schedule`` is a tree of conditions: one asset, ``all`` of several, ``any`` of
several. :func:`condition_met` says whether the assets that have unconsumed events meet it; it is
pure (no I/O), the leader calls it inside its fenced transaction. What it does not decide: which
events a run consumes (every unconsumed event of the DAG's scheduling assets, see
``schedd_store.asset_triggers``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator

from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct

from schedd.v1 import assets_pb2 as apb, resources_pb2 as pb
from schedd_core.errors import InvalidArgument, quote

MAX_URI_CHARS = 1500
MAX_NAME_CHARS = 250
#: The most bytes of an event's extra, as JSON.
MAX_EXTRA_BYTES = 64 * 1024
#: The deepest nesting of all/any conditions.
MAX_CONDITION_DEPTH = 8
#: The most assets a DAG's schedule, or a task's outlets or inlets, name.
MAX_ASSETS = 100

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f]")


def normalize_uri(field: str, uri: str) -> str:
    """The stored form of ``uri``; InvalidArgument naming ``field`` if it cannot name an asset."""
    if not uri:
        raise InvalidArgument(field, "must not be empty")
    if len(uri) > MAX_URI_CHARS:
        raise InvalidArgument(field, f"is {len(uri)} characters; the limit is {MAX_URI_CHARS}")
    if _BAD_CHARS.search(uri):
        raise InvalidArgument(field, f"{quote(uri)} contains whitespace or a control character")
    match = _SCHEME.match(uri)
    if match is None:
        raise InvalidArgument(field, f"{quote(uri)} is not a URI: it needs a scheme, as in 's3://bucket/key'")
    scheme, rest = match.group(1).lower(), match.group(2)
    if "#" in rest:
        raise InvalidArgument(field, f"{quote(uri)} has a fragment ('#'); an asset URI has none")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise InvalidArgument(field, "must not hold user information (credentials) before '@'")
    if not authority and not path:
        raise InvalidArgument(field, f"{quote(uri)} names nothing after the scheme")
    if path == "" and slash:
        slash = ""
    return f"{scheme}://{authority.lower()}{slash}{path}"


def check_name(field: str, name: str) -> None:
    if len(name) > MAX_NAME_CHARS:
        raise InvalidArgument(field, f"is longer than {MAX_NAME_CHARS} characters")
    if _BAD_CHARS.search(name.replace(" ", "")):
        raise InvalidArgument(field, "contains a control character")


def check_extra(field: str, extra: Struct) -> dict[str, object]:
    """An event's extra as a dict; InvalidArgument if its JSON is over MAX_EXTRA_BYTES or holds NUL."""
    value = json_format.MessageToDict(extra)
    text = json.dumps(value, separators=(",", ":"))
    if len(text.encode()) > MAX_EXTRA_BYTES:
        raise InvalidArgument(field, f"is {len(text.encode())} bytes as JSON; the limit is {MAX_EXTRA_BYTES}")
    if "\\u0000" in text:
        raise InvalidArgument(field, "must not contain NUL characters")
    return value


def normalize_refs(field: str, refs: Collection[apb.AssetRef]) -> None:
    """Normalise each ref's URI in place (InvalidArgument naming ``field[i]``); no duplicates."""
    if len(refs) > MAX_ASSETS:
        raise InvalidArgument(field, f"names {len(refs)} assets; the limit is {MAX_ASSETS}")
    seen: set[str] = set()
    for i, ref in enumerate(refs):
        ref.uri = normalize_uri(f"{field}[{i}].uri", ref.uri)
        check_name(f"{field}[{i}].name", ref.name)
        if ref.uri in seen:
            raise InvalidArgument(f"{field}[{i}].uri", f"{quote(ref.uri)} is named twice")
        seen.add(ref.uri)


def normalize_condition(field: str, condition: apb.AssetCondition, depth: int = 1) -> None:
    """Check and normalise a condition tree in place; InvalidArgument naming the field at fault."""
    if depth > MAX_CONDITION_DEPTH:
        raise InvalidArgument(field, f"nests deeper than {MAX_CONDITION_DEPTH} levels")
    kind = condition.WhichOneof("kind")
    if kind is None:
        raise InvalidArgument(field, "needs one of asset, all or any")
    if kind == "asset":
        condition.asset.uri = normalize_uri(f"{field}.asset.uri", condition.asset.uri)
        check_name(f"{field}.asset.name", condition.asset.name)
        return
    members = getattr(condition, kind).conditions
    if not members:
        raise InvalidArgument(f"{field}.{kind}", "needs at least one condition")
    for i, member in enumerate(members):
        normalize_condition(f"{field}.{kind}.conditions[{i}]", member, depth + 1)


def normalize_spec_assets(spec: pb.DagSpec) -> pb.DagSpec:
    """A copy of ``spec`` with every asset URI checked and normalised (InvalidArgument naming the
    field); the copy is what registration stores and hashes."""
    copy = pb.DagSpec()
    copy.CopyFrom(spec)
    for i, task in enumerate(copy.tasks):
        normalize_refs(f"spec.tasks[{i}].outlets", task.outlets)
        normalize_refs(f"spec.tasks[{i}].inlets", task.inlets)
    if copy.HasField("asset_schedule"):
        normalize_condition("spec.asset_schedule", copy.asset_schedule)
        if len(set(condition_uris(copy.asset_schedule))) > MAX_ASSETS:
            raise InvalidArgument("spec.asset_schedule", f"names more than {MAX_ASSETS} assets")
    return copy


def condition_uris(condition: apb.AssetCondition) -> Iterator[str]:
    """Every asset URI a condition names (once per mention)."""
    kind = condition.WhichOneof("kind")
    if kind == "asset":
        yield condition.asset.uri
    elif kind is not None:
        for member in getattr(condition, kind).conditions:
            yield from condition_uris(member)


def condition_met(condition: apb.AssetCondition, updated: Collection[str]) -> bool:
    """Whether the assets in ``updated`` (those with unconsumed events) meet ``condition``."""
    kind = condition.WhichOneof("kind")
    if kind == "asset":
        return condition.asset.uri in updated
    if kind == "all":
        return all(condition_met(c, updated) for c in condition.all.conditions)
    if kind == "any":
        return any(condition_met(c, updated) for c in condition.any.conditions)
    return False


def spec_assets(spec: pb.DagSpec) -> list[tuple[str, str, str, str]]:
    """(role, task id, uri, name) of every asset a spec names: ``schedule`` (task id empty),
    ``outlet`` and ``inlet``; for lineage and for recording events."""
    refs: list[tuple[str, str, str, str]] = []
    if spec.HasField("asset_schedule"):
        refs += [("schedule", "", uri, "") for uri in dict.fromkeys(condition_uris(spec.asset_schedule))]
    for task in spec.tasks:
        refs += [("outlet", task.task_id, r.uri, r.name) for r in task.outlets]
        refs += [("inlet", task.task_id, r.uri, r.name) for r in task.inlets]
    return refs
