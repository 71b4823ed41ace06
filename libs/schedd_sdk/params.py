"""``Param``: a DAG param with a type and rules, as Airflow users write them.

``@dag(params={"rows": Param(10, type="integer", minimum=1), "table": Param(type="string")})``
gives the DAG the default ``rows=10`` and a JSON Schema per param (``schedd_core.params``). A
``Param`` without a default is required: a manual run must set it in its conf, and a scheduled DAG
cannot have one. Plain values in ``params`` stay untyped defaults. The schemas are checked when the
DAG is compiled here, again by the api when it is registered, and each run's conf against them
when it is triggered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.params import REQUIRED, check_param_schemas
from schedd_sdk.errors import DagDefinitionError

_NO_DEFAULT = object()


class Param:
    """A param's default (none: required) and its JSON Schema keywords (``type``, ``minimum``,
    ``maximum``, ``enum``, ``pattern``, ``items``, ``description`` ...)."""

    def __init__(self, default: Any = _NO_DEFAULT, **schema: Any) -> None:
        if REQUIRED in schema:
            raise DagDefinitionError("Param: leave out the default to make a param required")
        self.default = default
        self.schema = dict(schema)

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    def __repr__(self) -> str:
        default = repr(self.default) if self.has_default else "required"
        return f"Param({default}, {self.schema!r})"


def split_params(params: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``params`` as (defaults, schemas by name); each None when there is none."""
    if params is None:
        return None, None
    defaults: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for name, value in params.items():
        if not isinstance(value, Param):
            defaults[name] = value
            continue
        schemas[name] = value.schema if value.has_default else {**value.schema, REQUIRED: True}
        if value.has_default:
            defaults[name] = value.default
    return defaults, schemas or None


def check_params(dag_id: str, spec: pb.DagSpec) -> None:
    """The compiled spec's schemas and defaults, checked as the api will (DagDefinitionError)."""
    try:
        check_param_schemas(spec)
    except InvalidArgument as exc:
        raise DagDefinitionError(f"DAG {dag_id!r}: {exc}") from None
