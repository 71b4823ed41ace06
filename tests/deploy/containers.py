"""schedd's containers as the deployment files define them, in one form for compose and Kubernetes:
the command line, the environment (values resolved where the files give them), declared ports,
probes, and the shutdown settings. Only containers of the schedd image are described.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.deploy.sources import Manifest

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "DaemonSet")
_INTERPOLATION = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-(?P<default>[^}]*)|:?\?[^}]*)?\}$")
_TINI = ("/usr/bin/tini", "tini")


@dataclass(frozen=True)
class Probe:
    kind: str  # grpc, http, exec, tcp
    port: int | str | None = None
    path: str = ""
    argv: tuple[str, ...] = ()


@dataclass
class Container:
    where: str
    argv: list[str]
    #: variable name to value; None where the value comes from a Secret, a field or interpolation
    env: dict[str, str | None]
    #: declared container ports, name to number (Kubernetes only)
    ports: dict[str, int] = field(default_factory=dict)
    declared_ports: list[int] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    #: seconds the runtime waits after SIGTERM before it kills
    grace: float | None = None
    pre_stop: list[str] | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    #: Kubernetes: the container replaces the image's entry point (tini)
    overrides_entrypoint: bool = False
    shares_process_namespace: bool = False

    def port_number(self, port: int | str | None) -> int | None:
        if isinstance(port, int):
            return port
        return self.ports.get(port or "")


def is_schedd_image(image: str) -> bool:
    """``schedd:0.1.0``, ``registry.example.com/schedd:0.1.0``, ``${SCHEDD_IMAGE:-schedd:0.1.0}``."""
    match = _INTERPOLATION.match(image)
    if match and match.group("default"):
        image = match.group("default")
    name = image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    return name == "schedd"


def compose_value(value: object) -> str | None:
    """A compose environment value, with ``${VAR:-default}`` read as its default; None for a value
    only known when compose runs (``${VAR:?message}``, ``${VAR}``)."""
    text = "" if value is None else str(value)
    match = _INTERPOLATION.match(text)
    if match:
        return match.group("default")
    return text


def _duration_seconds(text: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    total = 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text):
        total += float(amount) * units[unit]
    return total


def _compose_probe(healthcheck: dict[str, Any] | None) -> list[Probe]:
    if not healthcheck or healthcheck.get("disable"):
        return []
    test = healthcheck.get("test")
    if isinstance(test, list) and test and test[0] in ("CMD", "CMD-SHELL"):
        return [Probe("exec", argv=tuple(str(a) for a in test[1:]))]
    return [Probe("exec", argv=("sh", "-c", str(test)))]


def compose_containers(doc: dict[str, Any]) -> list[Container]:
    found = []
    for name, service in (doc.get("services") or {}).items():
        if not is_schedd_image(str(service.get("image", ""))):
            continue
        entrypoint = [str(a) for a in service.get("entrypoint") or []]
        if entrypoint[:1] and entrypoint[0] in _TINI:
            entrypoint = entrypoint[2:] if entrypoint[1:2] == ["--"] else entrypoint[1:]
        command = service.get("command") or []
        argv = entrypoint + ([str(a) for a in command] if isinstance(command, list) else command.split())
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.partition("=")[::2] for item in environment)
        grace = service.get("stop_grace_period")
        found.append(
            Container(
                where=f"compose service {name}",
                argv=argv,
                env={key: compose_value(value) for key, value in environment.items()},
                probes=_compose_probe(service.get("healthcheck")),
                grace=_duration_seconds(str(grace)) if grace is not None else 10.0,
            )
        )
    return found


def _k8s_probe(probe: dict[str, Any] | None) -> list[Probe]:
    if not probe:
        return []
    if "grpc" in probe:
        return [Probe("grpc", port=probe["grpc"]["port"])]
    if "httpGet" in probe:
        return [Probe("http", port=probe["httpGet"]["port"], path=probe["httpGet"].get("path", "/"))]
    if "exec" in probe:
        return [Probe("exec", argv=tuple(probe["exec"]["command"]))]
    return [Probe("tcp", port=probe.get("tcpSocket", {}).get("port"))]


def config_maps(manifests: list[Manifest]) -> dict[str, dict[str, str]]:
    return {m["metadata"]["name"]: m.get("data") or {} for m in manifests if m.get("kind") == "ConfigMap"}


def _k8s_env(entries: list[dict[str, Any]], maps: dict[str, dict[str, str]]) -> dict[str, str | None]:
    env: dict[str, str | None] = {}
    for entry in entries:
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
            continue
        ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
        env[entry["name"]] = maps.get(ref["name"], {}).get(ref["key"]) if ref else None
    return env


def pod_template(manifest: Manifest) -> dict[str, Any] | None:
    if manifest.get("kind") not in WORKLOAD_KINDS:
        return None
    template: dict[str, Any] = manifest["spec"]["template"]
    return template


def kubernetes_containers(manifests: list[Manifest]) -> list[Container]:
    maps = config_maps(manifests)
    found = []
    for manifest in manifests:
        template = pod_template(manifest)
        if template is None:
            continue
        pod = template["spec"]
        for container in pod.get("containers", []):
            if not is_schedd_image(container.get("image", "")):
                continue
            ports = container.get("ports") or []
            pre_stop = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec")
            found.append(
                Container(
                    where=f"{manifest['kind']}/{manifest['metadata']['name']} container {container['name']}",
                    argv=[str(a) for a in container.get("args") or []],
                    env=_k8s_env(container.get("env") or [], maps),
                    ports={p["name"]: p["containerPort"] for p in ports if "name" in p},
                    declared_ports=[p["containerPort"] for p in ports],
                    probes=[
                        *_k8s_probe(container.get("readinessProbe")),
                        *_k8s_probe(container.get("livenessProbe")),
                        *_k8s_probe(container.get("startupProbe")),
                    ],
                    grace=float(pod.get("terminationGracePeriodSeconds", 30)),
                    pre_stop=list(pre_stop["command"]) if pre_stop else None,
                    annotations=dict((template.get("metadata") or {}).get("annotations") or {}),
                    overrides_entrypoint="command" in container,
                    shares_process_namespace=bool(pod.get("shareProcessNamespace")),
                )
            )
    return found
