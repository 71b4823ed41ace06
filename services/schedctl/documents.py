"""Messages as the plain data schedctl prints (JSON, YAML, spec diffs), with numbers as written.

A ``google.protobuf.Struct`` or ``Value`` holds every number as a double, so a param default of
``10`` comes back as ``10.0``. :func:`plain_numbers` turns such numbers back into what they were
written as, wherever a message holds a Struct or Value (conf, params, param schemas, literal
arguments, task results): an integral number becomes an ``int``, except a DAG's or task's param
whose schema (the DAG's ``param_schemas``) has type ``number``, which stays a float (``10.0``).
A param whose schema says ``integer``, or has no schema, becomes an ``int`` when it is integral.
Guaranteed: only numbers are changed, and only integral ones of at most 2**53 (which a double holds
exactly); a non-integral number is never rounded.

:func:`spec_document` is a spec as a document without the fields at their defaults, the form of a
DAG file (``dags render``) and of spec diffs.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb
from schedd_core.jsonvalues import integral_numbers

_DYNAMIC = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})


def spec_document(spec: pb.DagSpec) -> dict[str, Any]:
    """``spec`` as a DAG file would say it: fields at their defaults left out, numbers as written."""
    data = json_format.MessageToDict(spec, preserving_proto_field_name=True)
    plain_numbers(pb.DagSpec.DESCRIPTOR, data)
    return data


def plain_numbers(descriptor: Any, data: dict[str, Any], floats: frozenset[str] = frozenset()) -> None:
    """Turn the integral doubles of every Struct and Value in ``data`` (the dict form of a message
    of type ``descriptor``) back into ints, in place; ``floats``: param names declared ``number``."""
    if descriptor.full_name == pb.DagSpec.DESCRIPTOR.full_name:
        floats = _number_params(data.get("param_schemas"))
    for field in descriptor.fields:
        if field.name not in data or field.message_type is None:
            continue
        value = data[field.name]
        kind = field.message_type
        if kind.full_name in _DYNAMIC:
            data[field.name] = _params(value, floats) if field.name == "params" else integral_numbers(value)
        elif kind.GetOptions().map_entry:
            entry_type = kind.fields_by_name["value"].message_type
            if entry_type is None:
                continue
            for key, item in value.items():
                if entry_type.full_name in _DYNAMIC:
                    value[key] = integral_numbers(item)
                elif isinstance(item, dict):
                    plain_numbers(entry_type, item, floats)
        elif not kind.full_name.startswith("google.protobuf."):
            for item in value if field.is_repeated else [value]:
                if isinstance(item, dict):
                    plain_numbers(kind, item, floats)


def _number_params(schemas: Any) -> frozenset[str]:
    """The params whose schema's type is ``number`` (alone or with others, but not ``integer``)."""
    if not isinstance(schemas, dict):
        return frozenset()
    found = set()
    for name, schema in schemas.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        if "number" in kinds and "integer" not in kinds:
            found.add(name)
    return frozenset(found)


def _params(value: Any, floats: frozenset[str]) -> Any:
    if not isinstance(value, dict):
        return integral_numbers(value)
    return {k: v if k in floats else integral_numbers(v) for k, v in value.items()}
