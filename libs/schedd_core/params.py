"""Typed params: a JSON Schema per param, checked when a DAG is registered and when a run starts.

A DAG's ``params`` are defaults; its ``param_schemas`` say, per param, what a value must be (any
JSON Schema keyword: ``type``, ``minimum``, ``enum``, ``pattern``, ``items``...), validated with the
``jsonschema`` library (draft 2020-12). A schema may also say ``"required": true``: a run must then
have a value for the param, from the default or its conf. Guaranteed: a manual run whose conf
breaks a schema is refused with INVALID_ARGUMENT naming ``conf.<param>`` and nothing is stored
(``tests/e2e/test_params_and_templates.py``); a scheduled DAG (whose runs have no conf) must have
a valid default for every required param. Params without a schema take any JSON value. Numbers
that are integral reach tasks as integers (``schedd_rpc.convert.from_struct``).

A conf may set only declared params: a key of the DAG's ``params`` or ``param_schemas`` or of a
task's ``params``. Any other key is refused the same way (``conf.<key>``), unless the DAG sets
``allow_undeclared_conf`` (``tests/security/test_operator_input.py``). This bounds what an operator
can set; it says nothing about the values, which tasks receive as data (quoted for the shell by
``schedd_core.templates``, passed to Python tasks as arguments, never evaluated).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.json_format import MessageToDict
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.jsonvalues import integral_numbers

#: The non-standard key that says a param must have a value.
REQUIRED = "required"


def _schemas(spec: pb.DagSpec) -> dict[str, dict[str, Any]]:
    if not spec.HasField("param_schemas"):
        return {}
    return {name: integral_numbers(schema) for name, schema in MessageToDict(spec.param_schemas).items()}


def _defaults(spec: pb.DagSpec) -> dict[str, Any]:
    return integral_numbers(MessageToDict(spec.params)) if spec.HasField("params") else {}


def _validator(field: str, schema: Any) -> tuple[Draft202012Validator, bool]:
    if not isinstance(schema, dict):
        raise InvalidArgument(field, "must be a JSON Schema object")
    required = schema.get(REQUIRED, False)
    if not isinstance(required, bool):
        raise InvalidArgument(f"{field}.{REQUIRED}", "must be true or false")
    body = {k: v for k, v in schema.items() if k != REQUIRED}
    try:
        Draft202012Validator.check_schema(body)
    except SchemaError as exc:
        raise InvalidArgument(field, f"is not a valid JSON Schema: {exc.message}") from None
    return Draft202012Validator(body), required


def _check(field: str, validator: Draft202012Validator, value: Any) -> None:
    try:
        validator.validate(value)
    except ValidationError as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
        raise InvalidArgument(f"{field}{where}", exc.message) from None


def check_param_schemas(spec: pb.DagSpec) -> None:
    """At registration: every schema is a JSON Schema, every default fits its schema, and a
    scheduled DAG has a default for every required param (its runs have no conf)."""
    defaults = _defaults(spec)
    scheduled = bool(spec.schedule) or spec.HasField("schedule_interval")
    for name, schema in _schemas(spec).items():
        field = f"spec.param_schemas.{name}"
        validator, required = _validator(field, schema)
        if name in defaults:
            _check(f"spec.params.{name}", validator, defaults[name])
        elif required and scheduled:
            raise InvalidArgument(
                field, "is required and has no default, so scheduled runs could never start"
            )


def declared_params(spec: pb.DagSpec) -> set[str]:
    """The names a run's conf may set: the DAG's params and param schemas, and every task's params."""
    names = set(_defaults(spec)) | set(_schemas(spec))
    for task in spec.tasks:
        if task.HasField("params"):
            names.update(task.params.keys())
    return names


def check_run_params(spec: pb.DagSpec, conf: Mapping[str, Any], *, field: str = "conf") -> None:
    """When a run is triggered: the conf sets only declared params (unless the DAG allows others),
    the params the run will have (defaults, the conf on top) fit the schemas, and a required param
    has a value. Errors name ``{field}.{param}``."""
    if not spec.allow_undeclared_conf:
        declared = declared_params(spec)
        for key in sorted(conf):
            if key not in declared:
                raise InvalidArgument(
                    f"{field}.{key}",
                    "is not a param of the DAG; declare it in the DAG's params "
                    "(or set allow_undeclared_conf on the DAG)",
                )
    values = {**_defaults(spec), **conf}
    for name, schema in _schemas(spec).items():
        validator, required = _validator(f"spec.param_schemas.{name}", schema)
        if name not in values:
            if required:
                raise InvalidArgument(f"{field}.{name}", "is required (the DAG's param has no default)")
            continue
        _check(f"{field}.{name}", validator, values[name])
