"""The Kustomize base and every overlay, rendered offline with ``kubectl kustomize``: valid in
strict mode against the Kubernetes API's schemas (kubernetes-validate; KEDA's ScaledObject against
``keda-scaledobject.schema.json``), each schedd container agreeing with its program, Services,
NetworkPolicies and budgets selecting real pods and ports, autoscalers scaling each queue's
workers on that queue's demand, and the production and development shapes."""

from __future__ import annotations

import re

import pytest

from schedd_coord.access import API_USER, SCHEDULER_USER, WORKER_USER
from tests.deploy import consistency, kubernetes_wiring, schemas, sources
from tests.deploy.cli_surface import ROOT
from tests.deploy.containers import is_schedd_image, kubernetes_containers, pod_template
from tests.deploy.sources import Manifest

NAMES = list(sources.KUSTOMIZATIONS)


def _kinds(manifests: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


@pytest.mark.parametrize("name", NAMES)
def test_rendered_manifests_are_valid_in_strict_mode(name: str) -> None:
    assert schemas.check_kubernetes_schemas(sources.render(name)) == []


@pytest.mark.parametrize("name", NAMES)
def test_each_schedd_container_agrees_with_its_program(name: str) -> None:
    manifests = sources.render(name)
    containers = kubernetes_containers(manifests)
    assert {c.argv[0] for c in containers} >= {
        "schedd-api",
        "schedd-scheduler",
        "schedd-registry",
        "schedd-worker",
        "schedd-migrate",
    }
    assert [p for c in containers for p in consistency.check_container(c, kubernetes=True)] == []


@pytest.mark.parametrize("name", NAMES)
def test_selectors_ports_config_and_autoscalers_fit_together(name: str) -> None:
    assert kubernetes_wiring.check_kubernetes_wiring(sources.render(name)) == []


@pytest.mark.parametrize("name", NAMES)
def test_every_pod_has_its_account_requests_limits_and_a_restricted_security_context(name: str) -> None:
    for manifest in sources.render(name):
        template = pod_template(manifest)
        if template is None:
            continue
        pod = template["spec"]
        where = f"{manifest['kind']}/{manifest['metadata']['name']}"
        assert pod.get("automountServiceAccountToken") is False, where
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        for container in pod["containers"]:
            assert container["resources"]["requests"], where
            assert container["resources"]["limits"]["memory"], where
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], where
        if is_schedd_image(pod["containers"][0]["image"]):
            assert pod["serviceAccountName"].startswith("schedd-"), where


@pytest.mark.parametrize("name", NAMES)
def test_servers_use_native_grpc_probes_and_the_registry_is_headless(name: str) -> None:
    manifests = sources.render(name)
    deployments = _kinds(manifests, "Deployment")
    for server in ("schedd-api", "schedd-registry"):
        container = deployments[server]["spec"]["template"]["spec"]["containers"][0]
        assert "grpc" in container["readinessProbe"] and "grpc" in container["livenessProbe"], server
    assert _kinds(manifests, "Service")["schedd-registry"]["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("name", NAMES)
def test_elections_and_quorum_survive_one_disruption(name: str) -> None:
    manifests = sources.render(name)
    scheduler = _kinds(manifests, "Deployment")["schedd-scheduler"]
    assert scheduler["spec"]["replicas"] >= 2
    spread = scheduler["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert any(s["topologyKey"] == "kubernetes.io/hostname" for s in spread)
    etcd = _kinds(manifests, "StatefulSet")["etcd"]
    assert etcd["spec"]["replicas"] == 3
    budgets = _kinds(manifests, "PodDisruptionBudget")
    assert budgets["etcd"]["spec"]["maxUnavailable"] == 1
    for component in ("api", "registry", "scheduler"):
        assert budgets[f"schedd-{component}"]["spec"]["minAvailable"] == 1


@pytest.mark.parametrize("name", NAMES)
def test_only_workers_reach_the_registry_and_only_schedd_reaches_etcd(name: str) -> None:
    policies = _kinds(sources.render(name), "NetworkPolicy")
    assert policies["default-deny-ingress"]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    [registry_rule] = policies["schedd-registry"]["spec"]["ingress"]
    assert registry_rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {"app.kubernetes.io/name": "schedd", "app.kubernetes.io/component": "worker"}
            }
        }
    ]
    etcd_clients = policies["etcd"]["spec"]["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0]
    assert etcd_clients["values"] == ["api", "scheduler", "worker", "etcd-init"]


def test_production_uses_an_external_database_and_scales_workers_with_keda() -> None:
    manifests = sources.render("production")
    assert "postgres" not in _kinds(manifests, "StatefulSet")
    url = _kinds(manifests, "ConfigMap")["schedd-config"]["data"]["SCHEDD_DATABASE_URL"]
    assert not re.search(r"@postgres:", url), url
    scaled = _kinds(manifests, "ScaledObject")
    assert set(scaled) == {d for d in _kinds(manifests, "Deployment") if d.startswith("schedd-worker-")}
    assert scaled["schedd-worker-batch"]["spec"]["minReplicaCount"] == 0
    assert not _kinds(manifests, "HorizontalPodAutoscaler")


def test_production_hpa_scales_every_worker_deployment_on_the_external_metric() -> None:
    manifests = sources.render("production-hpa")
    hpas = _kinds(manifests, "HorizontalPodAutoscaler")
    assert set(hpas) == {d for d in _kinds(manifests, "Deployment") if d.startswith("schedd-worker-")}
    assert not _kinds(manifests, "ScaledObject")


def test_dev_runs_its_own_database_reachable_only_by_the_services_that_use_it() -> None:
    manifests = sources.render("dev")
    assert "postgres" in _kinds(manifests, "StatefulSet")
    rule = _kinds(manifests, "NetworkPolicy")["postgres"]["spec"]["ingress"][0]
    assert rule["from"][0]["podSelector"]["matchExpressions"][0]["values"] == [
        "api",
        "scheduler",
        "registry",
        "migrate",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_secret_to_create_is_named_in_the_deployment_guide(name: str) -> None:
    manifests = sources.render(name)
    generated = set(_kinds(manifests, "Secret"))
    guide = (ROOT / "docs" / "deploy.md").read_text()
    missing = [s for s in kubernetes_wiring.secret_names(manifests) - generated if f"`{s}`" not in guide]
    assert missing == []


@pytest.mark.parametrize("name", NAMES)
def test_each_service_reaches_etcd_as_its_own_user_with_only_its_own_password(name: str) -> None:
    users = {"schedd-api": API_USER, "schedd-scheduler": SCHEDULER_USER, "schedd-worker": WORKER_USER}
    manifests = sources.render(name)
    checked = 0
    for manifest in manifests:
        template = pod_template(manifest)
        if template is None:
            continue
        volumes = {v["name"]: v for v in template["spec"].get("volumes") or []}
        for container in template["spec"]["containers"]:
            args = container.get("args") or []
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            if not args or args[0] not in users or "SCHEDD_ETCD_ENDPOINTS" not in env:
                continue
            assert env.get("SCHEDD_ETCD_USER") == users[args[0]], manifest["metadata"]["name"]
            assert "SCHEDD_ETCD_PASSWORD" not in env
            secret = volumes["etcd-password"]["secret"]
            assert secret["secretName"] == "schedd-etcd"
            assert [item["key"] for item in secret["items"]] == [users[args[0]]]
            checked += 1
    assert checked >= 4  # api, scheduler and a worker Deployment per queue
    [init] = [m for m in manifests if m["kind"] == "Job" and m["metadata"]["name"] == "schedd-etcd-init"]
    assert init["spec"]["template"]["spec"]["containers"][0]["args"] == ["schedd-etcd-setup"]
