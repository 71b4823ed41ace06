"""The trigger form of a DAG, made from its typed params (``DagSpec.params`` holds the defaults,
``DagSpec.param_schemas`` a JSON Schema per param).

Each param becomes one field: a list of choices for an ``enum``, true/false for a boolean, a number
field for ``integer`` and ``number``, a text field for a string, and JSON text for anything else.
A value typed into a field is read as that type; one that cannot be (``abc`` for an integer) is
refused here, naming the field, before the api is asked. An empty field is left out of the conf, so
the param keeps its default. Everything else (``minimum``, ``pattern``, required params...) is the
api's to check: its field errors (``conf.<param>``) are shown next to the field they name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.json_format import MessageToDict

from schedd.v1 import resources_pb2 as pb
from schedd_core.jsonvalues import integral_numbers

#: where the api names a conf key: ``conf.rows``, ``conf.rows[0]``, ``conf.rows.a``
_CONF_FIELD = re.compile(r"^conf\.(?P<name>[^.\[]+)")
#: JSON Schema types that get a field of their own; any other type is typed as JSON text
SCALAR_TYPES = ("boolean", "integer", "number", "string")


@dataclass
class ParamField:
    name: str
    kind: str
    required: bool = False
    description: str = ""
    #: the text the field shows: the submitted value, else the default
    value: str = ""
    has_default: bool = False
    #: for ``enum``: each choice as the JSON text that names it
    choices: list[str] = field(default_factory=list)
    error: str = ""


def _text(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if kind == "string" and isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _kind(schema: Mapping[str, Any], default: Any) -> str:
    if isinstance(schema.get("enum"), list):
        return "enum"
    declared = schema.get("type")
    if declared in SCALAR_TYPES:
        return str(declared)
    if declared is None and default is not None:
        if isinstance(default, bool):
            return "boolean"
        if isinstance(default, int | float):
            return "integer" if float(default).is_integer() else "number"
        if isinstance(default, str):
            return "string"
    return "json"


def param_fields(spec: pb.DagSpec) -> list[ParamField]:
    """One field per param of the DAG (its params and param schemas), in name order."""
    defaults = integral_numbers(MessageToDict(spec.params)) if spec.HasField("params") else {}
    schemas = integral_numbers(MessageToDict(spec.param_schemas)) if spec.HasField("param_schemas") else {}
    fields = []
    for name in sorted(set(defaults) | set(schemas)):
        found = schemas.get(name)
        schema: dict[str, Any] = found if isinstance(found, dict) else {}
        default = defaults.get(name)
        kind = _kind(schema, default)
        fields.append(
            ParamField(
                name=name,
                kind=kind,
                required=schema.get("required") is True,
                description=str(schema.get("description", "")),
                value=_text(default, kind),
                has_default=name in defaults,
                choices=[json.dumps(c, ensure_ascii=False) for c in schema.get("enum", [])],
            )
        )
    return fields


def _parse(param: ParamField, raw: str) -> Any:
    """The value of ``raw`` for ``param``; ValueError saying what is wrong."""
    if param.kind == "string":
        return raw
    if param.kind in ("enum", "json"):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError("must be JSON (a string in double quotes)") from None
    if param.kind == "boolean":
        if raw not in ("true", "false"):
            raise ValueError("must be true or false")
        return raw == "true"
    try:
        number = float(raw)
    except ValueError:
        raise ValueError(f"must be a number, not {raw!r}") from None
    if param.kind == "integer":
        if not number.is_integer():
            raise ValueError(f"must be a whole number, not {raw!r}")
        return int(number)
    return int(number) if number.is_integer() else number


def read_conf(fields: list[ParamField], form: Mapping[str, Any]) -> dict[str, Any]:
    """The conf the filled-in form asks for; each field shows what was typed, and a field whose
    text cannot be read gets its ``error`` (check :func:`has_errors`)."""
    conf: dict[str, Any] = {}
    for param in fields:
        raw = str(form.get(f"param.{param.name}", "")).strip()
        param.value = raw
        if not raw:
            continue
        try:
            conf[param.name] = _parse(param, raw)
        except ValueError as exc:
            param.error = str(exc)
    return conf


def has_errors(fields: list[ParamField]) -> bool:
    return any(f.error for f in fields)


def attach_api_errors(fields: list[ParamField], errors: Mapping[str, str]) -> dict[str, str]:
    """Put the api's field errors on the fields they name; the ones naming no field are returned
    (``field: problem``), for the top of the form."""
    by_name = {f.name: f for f in fields}
    rest = {}
    for path, problem in errors.items():
        found = _CONF_FIELD.match(path)
        target = by_name.get(found["name"]) if found else None
        if target is not None:
            target.error = f"{path}: {problem}"
        else:
            rest[path] = problem
    return rest
