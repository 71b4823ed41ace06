"""Offline schema validation: the compose file against the Compose Specification's JSON schema
that check-jsonschema ships (vendored), Kubernetes manifests against the API's schemas in strict
mode (kubernetes-validate: unknown fields are errors), and KEDA's ScaledObject, which those
schemas lack, against ``keda-scaledobject.schema.json`` here (written from KEDA's documented
ScaledObject fields). Each check returns the problems it found.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]

from tests.deploy.sources import Manifest

#: The Kubernetes version the manifests are validated for (the oldest the deployment supports:
#: native gRPC probes are GA since 1.27, the scale-down behaviour of autoscaling/v2 since 1.23).
KUBERNETES_VERSION = "1.29.0"
CUSTOM_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): Path(__file__).parent / "keda-scaledobject.schema.json"
}


@functools.cache
def _compose_schema() -> dict[str, Any]:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    loaded: dict[str, Any] = json.loads((vendor / "compose-spec.json").read_text())
    return loaded


def _errors(schema: dict[str, Any], document: Any) -> list[str]:
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]


def check_compose_schema(document: dict[str, Any]) -> list[str]:
    return [f"compose: {error}" for error in _errors(_compose_schema(), document)]


@functools.cache
def _custom_schema(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def check_kubernetes_schemas(manifests: list[Manifest]) -> list[str]:
    problems = []
    for manifest in manifests:
        where = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
        custom = CUSTOM_SCHEMAS.get((str(manifest.get("apiVersion")), str(manifest.get("kind"))))
        if custom is not None:
            problems += [f"{where}: {error}" for error in _errors(_custom_schema(custom), manifest)]
            continue
        try:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {manifest.get('apiVersion')} {manifest.get('kind')}")
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.path) or "(top)"
            problems.append(f"{where}: {path}: {exc.message}")
    return problems
