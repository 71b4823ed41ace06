"""Every check of tests/deploy catches what it is there to catch: each test breaks one thing in a
copy of the real files (an unknown variable, a wrong port, an invalid field, a short grace...)
and requires the check to name it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.deploy import compose_wiring, consistency, image, kubernetes_wiring, metric_names, schemas, sources
from tests.deploy.containers import compose_containers, kubernetes_containers
from tests.deploy.sources import Manifest


def _find(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    return next(m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name)


def _container(manifests: list[Manifest], name: str) -> dict[str, Any]:
    container: dict[str, Any] = _find(manifests, "Deployment", name)["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def _env(container: dict[str, Any], name: str) -> dict[str, Any]:
    entry: dict[str, Any] = next(e for e in container["env"] if e["name"] == name)
    return entry


def _kubernetes_container_problems(manifests: list[Manifest]) -> list[str]:
    return [
        p for c in kubernetes_containers(manifests) for p in consistency.check_container(c, kubernetes=True)
    ]


def _compose_container_problems(doc: dict[str, Any]) -> list[str]:
    return [p for c in compose_containers(doc) for p in consistency.check_container(c, kubernetes=False)]


# -- compose ---------------------------------------------------------------------------------------

COMPOSE_BREAKAGES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "an invalid field": (lambda d: d["services"]["api"].update(restart_policy="always"), "restart_policy"),
    "a wrong type": (lambda d: d["services"]["api"].update(secrets="tls-ca"), "secrets"),
    "an unknown env var": (
        lambda d: d["services"]["api"]["environment"].update(SCHEDD_API_PORT="50051"),
        "SCHEDD_API_PORT is not read by schedd-api",
    ),
    "authentication off": (
        lambda d: d["services"]["registry"]["environment"].update(SCHEDD_AUTH="none"),
        "SCHEDD_AUTH=none",
    ),
    "a command the image lacks": (
        lambda d: d["services"]["api"].update(command=["schedd-apiserver"]),
        "schedd-apiserver",
    ),
    "an unknown option": (
        lambda d: d["services"]["worker"].update(command=["schedd-worker", "--slots=8"]),
        "--slots is not an option",
    ),
    "an unknown option of a subcommand in a script": (
        lambda d: d["services"]["worker-token"]["command"].__setitem__(
            2, d["services"]["worker-token"]["command"][2].replace("--role enroll", "--kind enroll")
        ),
        "--kind is not an option",
    ),
    "a health check on the wrong port": (
        lambda d: d["services"]["api"]["healthcheck"]["test"].__setitem__(3, "127.0.0.1:50052"),
        "schedd-probe grpc 127.0.0.1:50052",
    ),
    "a health check option the probe lacks": (
        lambda d: d["services"]["registry"]["healthcheck"]["test"].append("--insecure"),
        "--insecure is not an option",
    ),
    "a listen port the health check does not follow": (
        lambda d: d["services"]["registry"]["environment"].update(SCHEDD_REGISTRY_LISTEN="0.0.0.0:6000"),
        "not a port it serves",
    ),
    "a worker killed before its drain ends": (
        lambda d: d["services"]["worker"].update(stop_grace_period="30s"),
        "its drain may take",
    ),
}


@pytest.mark.parametrize("breakage", list(COMPOSE_BREAKAGES))
def test_a_broken_compose_file_is_caught(breakage: str) -> None:
    doc = sources.compose()
    change, expected = COMPOSE_BREAKAGES[breakage]
    change(doc)
    problems = schemas.check_compose_schema(doc) + _compose_container_problems(doc)
    assert any(expected in p for p in problems), problems


def test_compose_wiring_breakages_are_caught() -> None:
    doc = sources.compose()
    del doc["services"]["scheduler"]["depends_on"]["migrate"]
    doc["services"]["registry"].pop("healthcheck")
    doc["services"]["worker"]["ports"] = ["9100:9100"]
    doc["services"]["worker"]["container_name"] = "worker"
    doc["services"]["scheduler"]["deploy"]["replicas"] = 1
    problems = "\n".join(compose_wiring.check_services(doc))
    for expected in (
        "scheduler: uses the database without waiting for migrate",
        "registry: no health check",
        "worker: publishes a fixed host port",
        "worker: container_name",
        "a standby needs 2",
    ):
        assert expected in problems


def test_a_scrape_config_on_the_wrong_port_is_caught() -> None:
    prometheus = sources.load_yaml(sources.PROMETHEUS_FILE)
    prometheus["scrape_configs"][0]["dns_sd_configs"][0]["port"] = 9101
    problems = compose_wiring.check_scrape_config(sources.compose(), prometheus)
    assert any("scrapes compose service api on 9101" in p for p in problems), problems


# -- Kubernetes ------------------------------------------------------------------------------------


def _unknown_field(m: list[Manifest]) -> None:
    _container(m, "schedd-api")["livenessProbe"]["grpcc"] = {"port": 50051}


def _wrong_type(m: list[Manifest]) -> None:
    _find(m, "Deployment", "schedd-scheduler")["spec"]["replicas"] = "two"


def _keda_invalid_field(m: list[Manifest]) -> None:
    _find(m, "ScaledObject", "schedd-worker-default")["spec"]["minReplicas"] = 1


def _keda_without_triggers(m: list[Manifest]) -> None:
    del _find(m, "ScaledObject", "schedd-worker-batch")["spec"]["triggers"]


def _keda_prometheus_without_threshold(m: list[Manifest]) -> None:
    del _find(m, "ScaledObject", "schedd-worker-batch")["spec"]["triggers"][0]["metadata"]["threshold"]


KUBERNETES_SCHEMA_BREAKAGES = {
    "an unknown field": (_unknown_field, "'grpcc' was unexpected"),
    "a wrong type": (_wrong_type, "'two' is not of type"),
    "a ScaledObject field KEDA does not have": (_keda_invalid_field, "'minReplicas' was unexpected"),
    "a ScaledObject without triggers": (_keda_without_triggers, "'triggers' is a required property"),
    "a prometheus trigger without threshold": (
        _keda_prometheus_without_threshold,
        "'threshold' is a required",
    ),
}


@pytest.mark.parametrize("breakage", list(KUBERNETES_SCHEMA_BREAKAGES))
def test_an_invalid_manifest_is_caught(breakage: str) -> None:
    manifests = sources.render("production")
    change, expected = KUBERNETES_SCHEMA_BREAKAGES[breakage]
    change(manifests)
    problems = schemas.check_kubernetes_schemas(manifests)
    assert any(expected in p for p in problems), problems


def _container_port(m: list[Manifest]) -> None:
    _container(m, "schedd-api")["ports"][0]["containerPort"] = 50061


def _probe_port(m: list[Manifest]) -> None:
    _container(m, "schedd-registry")["livenessProbe"]["grpc"]["port"] = 50051


def _metrics_probe_path(m: list[Manifest]) -> None:
    _container(m, "schedd-scheduler")["livenessProbe"]["httpGet"]["path"] = "/healthz"


def _unknown_env(m: list[Manifest]) -> None:
    _container(m, "schedd-worker-default")["env"].append({"name": "SCHEDD_WORKER_SLOTS", "value": "4"})


def _env_of_another_service(m: list[Manifest]) -> None:
    _container(m, "schedd-registry")["env"].append({"name": "SCHEDD_ETCD_ENDPOINTS", "value": "etcd:2379"})


def _unknown_flag(m: list[Manifest]) -> None:
    _container(m, "schedd-scheduler")["args"] = ["schedd-scheduler", "--leader-lease=2"]


def _entrypoint_replaced(m: list[Manifest]) -> None:
    _container(m, "schedd-api")["command"] = ["schedd-api"]


def _auth_off(m: list[Manifest]) -> None:
    _env(_container(m, "schedd-api"), "SCHEDD_AUTH")["value"] = "none"


def _short_grace(m: list[Manifest]) -> None:
    _find(m, "Deployment", "schedd-worker-batch")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ] = 300


def _longer_drain(m: list[Manifest]) -> None:
    _env(_container(m, "schedd-worker-default"), "SCHEDD_DRAIN_GRACE")["value"] = "900"


def _no_pre_stop(m: list[Manifest]) -> None:
    del _container(m, "schedd-worker-default")["lifecycle"]


def _scrape_annotation(m: list[Manifest]) -> None:
    annotations = _find(m, "Deployment", "schedd-api")["spec"]["template"]["metadata"]["annotations"]
    annotations["prometheus.io/port"] = "9090"


CONTAINER_BREAKAGES = {
    "a container port it does not listen on": (_container_port, "declares ports [9100, 50061]"),
    "a gRPC probe on another service's port": (_probe_port, "gRPC probe on 50051"),
    "an HTTP probe off the metrics endpoint": (_metrics_probe_path, "not an endpoint it serves"),
    "an unknown env var": (_unknown_env, "SCHEDD_WORKER_SLOTS is not read by schedd-worker"),
    "an env var of another service": (
        _env_of_another_service,
        "SCHEDD_ETCD_ENDPOINTS is not read by schedd-registry",
    ),
    "an unknown option": (_unknown_flag, "--leader-lease is not an option"),
    "the entry point replaced": (_entrypoint_replaced, "replacing the image's tini entry point"),
    "authentication off": (_auth_off, "SCHEDD_AUTH=none"),
    "a grace shorter than the drain": (_short_grace, "killed 300.0s after SIGTERM"),
    "a drain longer than the grace": (_longer_drain, "killed 330.0s after SIGTERM"),
    "no preStop drain": (_no_pre_stop, "no preStop hook that drains"),
    "a scrape annotation on the wrong port": (_scrape_annotation, "prometheus.io/port 9090"),
}


@pytest.mark.parametrize("breakage", list(CONTAINER_BREAKAGES))
def test_a_container_that_disagrees_with_its_program_is_caught(breakage: str) -> None:
    manifests = sources.render("production")
    change, expected = CONTAINER_BREAKAGES[breakage]
    change(manifests)
    problems = _kubernetes_container_problems(manifests)
    assert any(expected in p for p in problems), problems


def _service_target(m: list[Manifest]) -> None:
    _find(m, "Service", "schedd-api")["spec"]["ports"][0]["targetPort"] = "http"


def _service_selector(m: list[Manifest]) -> None:
    _find(m, "Service", "schedd-registry")["spec"]["selector"]["app.kubernetes.io/component"] = "registries"


def _policy_port(m: list[Manifest]) -> None:
    _find(m, "NetworkPolicy", "schedd-registry")["spec"]["ingress"][0]["ports"][0]["port"] = 50051


def _config_key(m: list[Manifest]) -> None:
    del _find(m, "ConfigMap", "schedd-config")["data"]["SCHEDD_ETCD_ENDPOINTS"]


def _keda_queue(m: list[Manifest]) -> None:
    trigger = _find(m, "ScaledObject", "schedd-worker-batch")["spec"]["triggers"][0]["metadata"]
    trigger["query"] = 'max(schedd_queue_demand{queue="default"}) or vector(0)'


def _keda_threshold(m: list[Manifest]) -> None:
    _find(m, "ScaledObject", "schedd-worker-default")["spec"]["triggers"][0]["metadata"]["threshold"] = "10"


def _capacity_changed(m: list[Manifest]) -> None:
    _env(_container(m, "schedd-worker-batch"), "SCHEDD_WORKER_CAPACITY")["value"] = "8"


def _keda_target(m: list[Manifest]) -> None:
    _find(m, "ScaledObject", "schedd-worker-default")["spec"]["scaleTargetRef"]["name"] = "schedd-api"


WIRING_BREAKAGES = {
    "a Service targeting a port no pod declares": (
        _service_target,
        "targetPort http is not a port of schedd-api",
    ),
    "a Service selecting no pods": (_service_selector, "Service/schedd-registry: selects no pods"),
    "a NetworkPolicy on the wrong port": (_policy_port, "port 50051 is not a port of schedd-registry"),
    "a ConfigMap key the pods need removed": (_config_key, "refers to schedd-config/SCHEDD_ETCD_ENDPOINTS"),
    "a ScaledObject on another queue's demand": (_keda_queue, "not schedd_queue_demand of queue 'batch'"),
    "a threshold other than the slots": (_keda_threshold, "threshold 10, the workers have 4 slots"),
    "workers with more slots than the threshold": (
        _capacity_changed,
        "threshold 2, the workers have 8 slots",
    ),
    "a ScaledObject scaling something else": (_keda_target, "scales schedd-api, not a worker Deployment"),
}


@pytest.mark.parametrize("breakage", list(WIRING_BREAKAGES))
def test_manifests_that_do_not_fit_together_are_caught(breakage: str) -> None:
    manifests = sources.render("production")
    change, expected = WIRING_BREAKAGES[breakage]
    change(manifests)
    problems = kubernetes_wiring.check_kubernetes_wiring(manifests)
    assert any(expected in p for p in problems), problems


def test_an_hpa_on_another_queue_or_target_is_caught() -> None:
    manifests = sources.render("production-hpa")
    hpa = _find(manifests, "HorizontalPodAutoscaler", "schedd-worker-default")
    hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"]["queue"] = "batch"
    hpa["spec"]["metrics"][0]["external"]["target"]["averageValue"] = "2"
    problems = "\n".join(kubernetes_wiring.check_autoscalers(manifests))
    assert "not schedd_queue_demand of queue 'default'" in problems
    assert "averageValue 2, the workers have 4 slots" in problems


# -- the image and the metric names ----------------------------------------------------------------


def test_a_dockerfile_that_misses_a_command_or_runs_as_root_is_caught() -> None:
    instructions = [
        (k, r.replace(" schedd-probe", "") if "for command in" in r else r)
        for k, r in sources.dockerfile_instructions()
        if k != "USER"
    ]
    instructions.insert(-2, ("RUN", "apt-get install -y build-essential"))
    problems = "\n".join(image.check_dockerfile(instructions))
    assert "verifies the commands" in problems
    assert "non-root user" in problems
    assert "installs build tools" in problems


def test_an_unpinned_base_image_is_caught() -> None:
    instructions = [
        (k, "PYTHON_IMAGE=python:3.11-slim" if r.startswith("PYTHON_IMAGE=") else r)
        for k, r in sources.dockerfile_instructions()
    ]
    assert any("not a pinned" in p for p in image.check_dockerfile(instructions))


def test_a_series_no_service_exposes_is_caught() -> None:
    dashboard = sources.dashboard()
    dashboard["panels"][1]["targets"][0]["expr"] = "sum(schedd_queue_backlog)"
    problems = metric_names.check_series("dashboard", metric_names.dashboard_expressions(dashboard))
    assert problems == ["dashboard: schedd_queue_backlog is not a series schedd exposes"]
