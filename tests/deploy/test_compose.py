"""The compose file: valid against the Compose Specification's schema (check-jsonschema's vendored
copy), every schedd container's command, options, environment and health check agree with the
programs (``tests.deploy.consistency``), the migration runs first, workers scale, Prometheus
scrapes every service, and the stack runs with tokens and TLS."""

from __future__ import annotations

import pytest

from schedd_coord.access import API_USER, SCHEDULER_USER, WORKER_USER
from tests.deploy import compose_wiring, consistency, schemas, sources
from tests.deploy.containers import Container, compose_containers


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    assert schemas.check_compose_schema(sources.compose()) == []


@pytest.mark.parametrize("container", compose_containers(sources.compose()), ids=lambda c: c.where)
def test_each_schedd_container_agrees_with_its_program(container: Container) -> None:
    assert consistency.check_container(container, kubernetes=False) == []


def test_migration_first_health_checks_and_scalable_workers() -> None:
    assert compose_wiring.check_services(sources.compose()) == []


def test_prometheus_scrapes_every_service_on_its_metrics_port() -> None:
    prometheus = sources.load_yaml(sources.PROMETHEUS_FILE)
    assert compose_wiring.check_scrape_config(sources.compose(), prometheus) == []


def test_servers_require_tokens_and_serve_tls_from_mounted_certificates() -> None:
    services = sources.compose()["services"]
    for name in ("api", "registry"):
        env = services[name]["environment"]
        assert env["SCHEDD_AUTH"] == "tokens"
        assert set(services[name]["secrets"]) >= {"tls-server-cert", "tls-server-key"}
        assert env["SCHEDD_TLS_CERT_FILE"] == "/run/secrets/tls-server-cert"
        assert env["SCHEDD_TLS_KEY_FILE"] == "/run/secrets/tls-server-key"
    worker = services["worker"]["environment"]
    assert worker["SCHEDD_TLS_CA_FILE"] == "/run/secrets/tls-ca"
    assert worker["SCHEDD_ENROLL_TOKEN_FILE"].startswith("/tokens/")
    # Tasks inherit the worker's environment: it must hold no database credentials.
    assert not {"SCHEDD_DATABASE_URL", "PGPASSWORD"} & set(worker)


def test_the_observability_profile_has_a_collector_prometheus_and_a_provisioned_grafana() -> None:
    services = sources.compose()["services"]
    profiled = {name for name, s in services.items() if "observability" in (s.get("profiles") or [])}
    assert profiled == {"otel-collector", "prometheus", "grafana"}
    provider = sources.load_yaml(sources.DEPLOY / "grafana" / "provisioning" / "dashboards" / "schedd.yaml")
    mounted = {v.split(":")[1]: v.split(":")[0] for v in services["grafana"]["volumes"]}
    dashboards_dir = mounted[provider["providers"][0]["options"]["path"]]
    assert (sources.COMPOSE_FILE.parent / dashboards_dir / sources.DASHBOARD_FILE.name).resolve() == (
        sources.DASHBOARD_FILE
    )


ETCD_USERS = {"schedd-api": API_USER, "schedd-scheduler": SCHEDULER_USER, "schedd-worker": WORKER_USER}


def test_each_service_reaches_etcd_as_its_own_user_after_etcd_init() -> None:
    services = sources.compose()["services"]
    checked = set()
    for container in compose_containers(sources.compose()):
        found = consistency.program(container)
        if found is None or "SCHEDD_ETCD_ENDPOINTS" not in container.env or found[0] not in ETCD_USERS:
            continue
        user = ETCD_USERS[found[0]]
        assert container.env.get("SCHEDD_ETCD_USER") == user, container.where
        assert "SCHEDD_ETCD_PASSWORD" not in container.env, container.where  # a file, never a value
        secret = str(container.env.get("SCHEDD_ETCD_PASSWORD_FILE")).removeprefix("/run/secrets/")
        name = container.where.removeprefix("compose service ")
        assert secret in services[name]["secrets"], container.where
        assert services[name]["depends_on"]["etcd-init"] == {"condition": "service_completed_successfully"}
        assert sources.compose()["secrets"][secret]["file"] == f"./secrets/etcd/{user}"
        checked.add(found[0])
    assert checked == set(ETCD_USERS)
    init = services["etcd-init"]
    assert init["command"] == ["schedd-etcd-setup"]
    assert {s["target"] for s in init["secrets"] if isinstance(s, dict)} == {
        f"etcd-users/{u}" for u in ETCD_USERS.values()
    }


def test_etcd_serves_tls_and_every_client_verifies_it() -> None:
    """etcd listens for clients on https only, with the certificate make-secrets.sh issues for the
    name etcd; everything that talks to it uses an https endpoint and the CA it was given."""
    compose = sources.compose()
    services = compose["services"]
    flags = services["etcd"]["command"]
    assert "--listen-client-urls=https://0.0.0.0:2379" in flags
    assert "--advertise-client-urls=https://etcd:2379" in flags
    for flag, secret in (("--cert-file", "etcd-tls-cert"), ("--key-file", "etcd-tls-key")):
        assert f"{flag}=/run/secrets/{secret}" in flags
        assert secret in services["etcd"]["secrets"]
    assert compose["secrets"]["etcd-tls-cert"]["file"] == "./secrets/tls/etcd.crt"
    assert (
        'issue etcd serverAuth "DNS:etcd,'
        in (sources.COMPOSE_FILE.parents[1] / "make-secrets.sh").read_text()
    )
    clients = [c for c in compose_containers(compose) if "SCHEDD_ETCD_ENDPOINTS" in c.env]
    assert len(clients) >= 4  # etcd-init, api, scheduler, worker
    for container in clients:
        assert str(container.env["SCHEDD_ETCD_ENDPOINTS"]).startswith("https://"), container.where
        ca = str(container.env.get("SCHEDD_ETCD_CA_FILE")).removeprefix("/run/secrets/")
        name = container.where.removeprefix("compose service ")
        assert ca == "tls-ca" and "tls-ca" in services[name]["secrets"], container.where
