"""Checks across the manifests of one rendered kustomization: Services, NetworkPolicies and
PodDisruptionBudgets select pods that exist and name ports those pods declare; ConfigMap
references resolve; each autoscaler scales a worker Deployment on that Deployment's own queue
with its slots as the target. Each check returns the problems it found.
"""

from __future__ import annotations

import re
from typing import Any

from tests.deploy.cli_surface import surface
from tests.deploy.containers import config_maps, is_schedd_image, pod_template
from tests.deploy.sources import Manifest


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        present = expression["key"] in labels
        inside = labels.get(expression["key"]) in (expression.get("values") or [])
        operator = expression["operator"]
        if (
            (operator == "In" and not inside)
            or (operator == "NotIn" and inside)
            or (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
        ):
            return False
    return True


def _pods(manifests: list[Manifest]) -> list[tuple[str, dict[str, str], list[dict[str, Any]]]]:
    """(workload name, pod labels, containers) of every pod template."""
    pods = []
    for manifest in manifests:
        template = pod_template(manifest)
        if template is not None:
            labels = (template.get("metadata") or {}).get("labels") or {}
            pods.append((manifest["metadata"]["name"], labels, template["spec"]["containers"]))
    return pods


def _declares(containers: list[dict[str, Any]], port: int | str) -> bool:
    for container in containers:
        for declared in container.get("ports") or []:
            if port in (declared["containerPort"], declared.get("name")):
                return True
    return False


def check_selectors_and_ports(manifests: list[Manifest]) -> list[str]:
    pods = _pods(manifests)
    problems = []
    for m in manifests:
        kind, name = m["kind"], m["metadata"]["name"]
        if kind == "Service":
            selected = [p for p in pods if _selects({"matchLabels": m["spec"].get("selector") or {}}, p[1])]
            if not selected:
                problems.append(f"Service/{name}: selects no pods")
            for port in m["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                for workload, _, containers in selected:
                    if not _declares(containers, target):
                        problems.append(f"Service/{name}: targetPort {target} is not a port of {workload}")
        elif kind == "PodDisruptionBudget":
            if not any(_selects(m["spec"]["selector"], p[1]) for p in pods):
                problems.append(f"PodDisruptionBudget/{name}: selects no pods")
        elif kind == "NetworkPolicy":
            selected = [p for p in pods if _selects(m["spec"]["podSelector"], p[1])]
            if not selected:
                problems.append(f"NetworkPolicy/{name}: selects no pods")
            for rule in m["spec"].get("ingress") or []:
                for source in rule.get("from") or []:
                    in_namespace = "podSelector" in source and "namespaceSelector" not in source
                    if in_namespace and not any(_selects(source["podSelector"], p[1]) for p in pods):
                        problems.append(f"NetworkPolicy/{name}: admits traffic from no pods")
                for port in rule.get("ports") or []:
                    for workload, _, containers in selected:
                        if not _declares(containers, port["port"]):
                            problems.append(
                                f"NetworkPolicy/{name}: port {port['port']} is not a port of {workload}"
                            )
    return problems


def check_config_references(manifests: list[Manifest]) -> list[str]:
    maps = config_maps(manifests)
    problems = []
    for workload, _, containers in _pods(manifests):
        for container in containers:
            for entry in container.get("env") or []:
                ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
                if ref and ref["key"] not in maps.get(ref["name"], {}):
                    problems.append(
                        f"{workload}: {entry['name']} refers to {ref['name']}/{ref['key']}, absent"
                    )
    return problems


def secret_names(manifests: list[Manifest]) -> set[str]:
    """The Secrets the pods need (environment and volumes)."""
    names = set()
    for manifest in manifests:
        template = pod_template(manifest)
        if template is None:
            continue
        for volume in template["spec"].get("volumes") or []:
            if "secret" in volume:
                names.add(volume["secret"]["secretName"])
        for container in template["spec"]["containers"]:
            for entry in container.get("env") or []:
                ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    names.add(ref["name"])
    return names


def _worker_queue_and_slots(manifests: list[Manifest], deployment: str) -> tuple[str, int] | None:
    maps = config_maps(manifests)
    for m in manifests:
        if m["kind"] != "Deployment" or m["metadata"]["name"] != deployment:
            continue
        for container in m["spec"]["template"]["spec"]["containers"]:
            if (
                not is_schedd_image(container.get("image", ""))
                or container.get("args", [""])[0] != "schedd-worker"
            ):
                continue
            env: dict[str, object] = {}
            for entry in container.get("env") or []:
                ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
                env[entry["name"]] = entry.get(
                    "value", maps.get(ref["name"], {}).get(ref["key"]) if ref else None
                )
            worker = surface("schedd-worker")
            queues = str(env.get("SCHEDD_WORKER_QUEUES", worker.default("SCHEDD_WORKER_QUEUES")))
            slots = int(str(env.get("SCHEDD_WORKER_CAPACITY", worker.default("SCHEDD_WORKER_CAPACITY"))))
            if "," in queues:
                return None
            return queues.strip(), slots
    return None


def _same_number(a: object, b: int) -> bool:
    try:
        return float(str(a)) == float(b)
    except ValueError:
        return False


def check_autoscalers(manifests: list[Manifest]) -> list[str]:
    """Every ScaledObject and HorizontalPodAutoscaler scales a one-queue worker Deployment on
    ``schedd_queue_demand`` of that queue, with the workers' slots as the target per replica."""
    problems = []
    for m in manifests:
        kind, name = m["kind"], m["metadata"]["name"]
        if kind not in ("ScaledObject", "HorizontalPodAutoscaler"):
            continue
        target = m["spec"]["scaleTargetRef"]["name"]
        worker = _worker_queue_and_slots(manifests, target)
        if worker is None:
            problems.append(f"{kind}/{name}: scales {target}, not a worker Deployment of one queue")
            continue
        queue, slots = worker
        if kind == "ScaledObject":
            for trigger in m["spec"]["triggers"]:
                meta = trigger.get("metadata") or {}
                query = meta.get("query", "")
                if trigger["type"] != "prometheus" or not re.search(
                    r'schedd_queue_demand\{queue="' + re.escape(queue) + r'"\}', query
                ):
                    problems.append(f"{kind}/{name}: trigger is not schedd_queue_demand of queue {queue!r}")
                if not _same_number(meta.get("threshold"), slots):
                    problems.append(
                        f"{kind}/{name}: threshold {meta.get('threshold')}, the workers have {slots} slots"
                    )
                if "activationThreshold" not in meta:
                    problems.append(f"{kind}/{name}: no activationThreshold")
        else:
            for metric in m["spec"].get("metrics") or []:
                external = metric.get("external") or {}
                selector = (external.get("metric") or {}).get("selector") or {}
                if (external.get("metric") or {}).get("name") != "schedd_queue_demand" or (
                    selector.get("matchLabels") or {}
                ).get("queue") != queue:
                    problems.append(f"{kind}/{name}: metric is not schedd_queue_demand of queue {queue!r}")
                average = (external.get("target") or {}).get("averageValue")
                if not _same_number(average, slots):
                    problems.append(f"{kind}/{name}: averageValue {average}, the workers have {slots} slots")
    return problems


def check_kubernetes_wiring(manifests: list[Manifest]) -> list[str]:
    return [
        *check_selectors_and_ports(manifests),
        *check_config_references(manifests),
        *check_autoscalers(manifests),
    ]
