"""The deployment files as data: the compose file, the rendered Kustomize directories, the
Dockerfile's instructions, the Prometheus configuration and the Grafana dashboard.

Rendering needs ``kubectl`` (its built-in Kustomize, offline); :func:`kubectl` skips the calling
test, saying so, where it is not installed.
"""

from __future__ import annotations

import functools
import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.cli_surface import ROOT

DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "compose" / "compose.yaml"
PROMETHEUS_FILE = DEPLOY / "prometheus" / "prometheus.yml"
DASHBOARD_FILE = DEPLOY / "grafana" / "dashboards" / "schedd.json"
ADAPTER_VALUES_FILE = DEPLOY / "k8s" / "components" / "hpa-autoscaling" / "prometheus-adapter-values.yaml"
DOCKERFILE = ROOT / "Dockerfile"
#: Every directory ``kubectl kustomize`` renders: the base and each overlay.
KUSTOMIZATIONS = {
    "base": DEPLOY / "k8s" / "base",
    **{path.name: path for path in sorted((DEPLOY / "k8s" / "overlays").iterdir()) if path.is_dir()},
}

Manifest = dict[str, Any]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def compose() -> dict[str, Any]:
    """The compose file as docker compose reads it (YAML merge keys resolved)."""
    loaded: dict[str, Any] = load_yaml(COMPOSE_FILE)
    return loaded


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed: the Kustomize directories cannot be rendered offline")
    return found


@functools.cache
def _rendered_text(directory: Path) -> str:
    return subprocess.run(
        [kubectl(), "kustomize", str(directory)], check=True, capture_output=True, text=True, timeout=120
    ).stdout


def render(name: str) -> list[Manifest]:
    """The manifests of one kustomization (``base``, ``dev``, ``production``...), freshly parsed (the
    caller may change them)."""
    return [doc for doc in yaml.safe_load_all(_rendered_text(KUSTOMIZATIONS[name])) if doc]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the Dockerfile, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def exec_form(arguments: str) -> list[str]:
    """The argument list of an exec-form instruction (``CMD ["a", "b"]``), or the shell words."""
    if arguments.startswith("["):
        parsed: list[str] = json.loads(arguments)
        return parsed
    return shlex.split(arguments)


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text())
    return loaded
