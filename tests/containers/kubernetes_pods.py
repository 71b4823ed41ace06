"""The schedd pods of the rendered Kubernetes overlays, run as containers of the image ``make images``
built: each pod's exact command (the image's entry point and the container's args), environment
(ConfigMap values resolved, Secrets and the pod's name filled in), volumes (Secret files at their
mount paths with their items, emptyDirs as tmpfs), user, read-only root, dropped capabilities; then
its probes and its preStop hook run exactly as the kubelet would, from inside the container.

The Services they name are the compose stack's own PostgreSQL and etcd (tests/containers/
test_kubernetes_commands.py), with the compose secrets laid out as the Kubernetes Secrets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docker.models.containers import Container

from tests.deploy.containers import config_maps, is_schedd_image, pod_template
from tests.deploy.sources import Manifest

PROBE_KINDS = ("startupProbe", "readinessProbe", "livenessProbe")


class Pod:
    """One container of a pod template of the schedd image."""

    def __init__(self, overlay: str, manifest: Manifest, spec: dict[str, Any], container: dict[str, Any]):
        self.overlay = overlay
        self.kind = str(manifest["kind"])
        self.name = str(manifest["metadata"]["name"])
        self.spec = spec
        self.container = container
        self.maps: dict[str, dict[str, str]] = {}  # set by pods()

    @property
    def where(self) -> str:
        return f"{self.overlay}: {self.kind}/{self.name} container {self.container['name']}"

    def identity(self) -> str:
        """What makes two pods the same container (the overlays repeat most of them)."""
        return json.dumps([self.kind, self.name, self.container, self.spec.get("volumes")], sort_keys=True)

    def env(self, secrets: dict[str, dict[str, str]], pod_name: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for entry in self.container.get("env") or []:
            if "value" in entry:
                env[entry["name"]] = str(entry["value"])
                continue
            source = entry["valueFrom"]
            if "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                env[entry["name"]] = self.maps[ref["name"]][ref["key"]]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                env[entry["name"]] = secrets[_secret(ref["name"])][ref["key"]]
            elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[entry["name"]] = pod_name
            else:
                raise AssertionError(f"{self.where}: cannot fill {entry}")
        return env

    def volumes(
        self, secrets: dict[str, dict[str, str]], files: Path
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Bind mounts of the Secret volumes (files as the kubelet lays them out) and tmpfs mounts."""
        declared = {v["name"]: v for v in self.spec.get("volumes") or []}
        binds: dict[str, Any] = {}
        tmpfs: dict[str, str] = {}
        for mount in self.container.get("volumeMounts") or []:
            volume = declared[mount["name"]]
            if "emptyDir" in volume:
                tmpfs[mount["mountPath"]] = "mode=1777"
            elif "secret" in volume:
                data = secrets[_secret(volume["secret"]["secretName"])]
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
                directory = files / f"{self.name}-{mount['name']}"
                directory.mkdir(parents=True, exist_ok=True)
                for item in items:
                    (directory / item["path"]).write_text(data[item["key"]])
                    (directory / item["path"]).chmod(0o444)
                binds[str(directory)] = {"bind": mount["mountPath"], "mode": "ro"}
            else:
                raise AssertionError(f"{self.where}: volume {volume} is not a Secret or an emptyDir")
        return binds, tmpfs

    def create_options(self) -> dict[str, Any]:
        """User, read-only root, capabilities and privilege escalation as the security contexts say."""
        pod_context = self.spec.get("securityContext") or {}
        context = {**pod_context, **(self.container.get("securityContext") or {})}
        options: dict[str, Any] = {}
        if "runAsUser" in context:
            options["user"] = f"{context['runAsUser']}:{context.get('runAsGroup', context['runAsUser'])}"
        options["read_only"] = bool(context.get("readOnlyRootFilesystem"))
        options["cap_drop"] = list((context.get("capabilities") or {}).get("drop") or [])
        if context.get("allowPrivilegeEscalation") is False:
            options["security_opt"] = ["no-new-privileges"]
        return options

    def command(self) -> list[str] | None:
        """The container's command (None: the image's entry point) and its args."""
        command = self.container.get("command")
        return [str(a) for a in command] if command else None

    def args(self) -> list[str]:
        return [str(a) for a in self.container.get("args") or []]

    def ports(self) -> dict[str, int]:
        return {p["name"]: p["containerPort"] for p in self.container.get("ports") or [] if "name" in p}

    def probe_commands(self) -> list[tuple[str, list[str]]]:
        """Each probe as a command run in the container, doing what the kubelet does."""
        found = []
        for kind in PROBE_KINDS:
            probe = self.container.get(kind)
            if not probe:
                continue
            if "grpc" in probe:
                found.append((kind, ["schedd-probe", "grpc", f"127.0.0.1:{probe['grpc']['port']}"]))
            elif "httpGet" in probe:
                port = probe["httpGet"]["port"]
                port = self.ports().get(port, port) if isinstance(port, str) else port
                url = f"http://127.0.0.1:{port}{probe['httpGet'].get('path', '/')}"
                check = f"import urllib.request as u; assert u.urlopen({url!r}, timeout=3).status == 200"
                found.append((kind, ["python", "-c", check]))
            elif "exec" in probe:
                found.append((kind, [str(a) for a in probe["exec"]["command"]]))
            else:
                raise AssertionError(f"{self.where}: {kind} {probe} is not grpc, httpGet or exec")
        return found

    def pre_stop(self) -> list[str] | None:
        hook = ((self.container.get("lifecycle") or {}).get("preStop") or {}).get("exec")
        return [str(a) for a in hook["command"]] if hook else None

    def grace(self) -> float:
        return float(self.spec.get("terminationGracePeriodSeconds", 30))


def _secret(name: str) -> str:
    """A Secret's name without the hash suffix a Kustomize generator adds (schedd-database-c27g4ghm89)."""
    # Longest first: schedd-etcd-tls is not schedd-etcd with a hash suffix.
    for known in (
        "schedd-worker-enroll",
        "schedd-etcd-tls",
        "schedd-database",
        "schedd-bootstrap",
        "schedd-etcd",
    ):
        if name == known or name.startswith(known + "-"):
            return known
    raise AssertionError(f"unknown Secret {name}")


def pods(overlays: dict[str, list[Manifest]]) -> list[Pod]:
    """Every distinct container of the schedd image in the overlays, Jobs first (the order they run)."""
    found: dict[str, Pod] = {}
    for overlay, manifests in overlays.items():
        maps = config_maps(manifests)
        for manifest in manifests:
            template = pod_template(manifest)
            if template is None:
                continue
            for container in template["spec"].get("containers", []):
                if is_schedd_image(container.get("image", "")):
                    pod = Pod(overlay, manifest, template["spec"], container)
                    pod.maps = maps
                    found.setdefault(pod.identity(), pod)
    order = {"schedd-etcd-init": 0, "schedd-migrate": 1, "schedd-api": 2, "schedd-registry": 3}
    return sorted(found.values(), key=lambda p: (order.get(p.name, 4), p.overlay))


def exit_code(container: Container, timeout: float) -> int:
    return int(container.wait(timeout=timeout)["StatusCode"])
