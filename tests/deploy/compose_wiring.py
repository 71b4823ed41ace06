"""Checks across the compose file's services: the migration runs first, every long-running
service has a health check, workers can be scaled (no fixed names or host ports), two schedulers
campaign, and Prometheus scrapes every service's metrics port. Each check returns the problems
it found.
"""

from __future__ import annotations

from typing import Any

from tests.deploy.consistency import listening
from tests.deploy.containers import compose_containers

#: Services whose image has no program to run a health check with (the collector's is
#: distroless); Prometheus scrapes it instead.
HEALTH_CHECK_EXEMPT = frozenset({"otel-collector"})


def one_shot_services(doc: dict[str, Any]) -> set[str]:
    """Services another one waits for with ``condition: service_completed_successfully``."""
    found = set()
    for service in doc["services"].values():
        depends = service.get("depends_on") or {}
        if isinstance(depends, dict):
            for name, rule in depends.items():
                if (rule or {}).get("condition") == "service_completed_successfully":
                    found.add(name)
    return found


def _fixed_host_port(entry: object) -> bool:
    if isinstance(entry, dict):
        return bool(entry.get("published"))
    parts = str(entry).split(":")
    return len(parts) == 2 or (len(parts) == 3 and parts[1] != "")


def check_services(doc: dict[str, Any]) -> list[str]:
    services: dict[str, Any] = doc["services"]
    one_shot = one_shot_services(doc)
    problems = []
    for name, service in services.items():
        env = service.get("environment") or {}
        if "SCHEDD_DATABASE_URL" in env and name != "migrate":
            rule = (service.get("depends_on") or {}).get("migrate") or {}
            if rule.get("condition") != "service_completed_successfully":
                problems.append(f"compose service {name}: uses the database without waiting for migrate")
        healthcheck = service.get("healthcheck") or {}
        if name not in one_shot and "tools" not in (service.get("profiles") or []):
            if healthcheck.get("disable") and name not in HEALTH_CHECK_EXEMPT:
                problems.append(f"compose service {name}: health check disabled")
            elif not healthcheck.get("disable") and not healthcheck.get("test"):
                problems.append(f"compose service {name}: no health check")
        if "container_name" in service:
            problems.append(f"compose service {name}: container_name prevents --scale")
        if any(_fixed_host_port(entry) for entry in service.get("ports") or []):
            problems.append(f"compose service {name}: publishes a fixed host port")
    replicas = ((services.get("scheduler") or {}).get("deploy") or {}).get("replicas", 1)
    if replicas < 2:
        problems.append(f"compose service scheduler: {replicas} replica(s); a standby needs 2")
    return problems


def check_scrape_config(doc: dict[str, Any], prometheus: dict[str, Any]) -> list[str]:
    """Every schedd service serving /metrics is scraped, on the port it serves it on."""
    metrics_ports = {}
    for container in compose_containers(doc):
        port = listening(container)[1]
        if port is not None:
            metrics_ports[container.where.removeprefix("compose service ")] = port
    scraped: dict[str, int] = {}
    for job in prometheus.get("scrape_configs") or []:
        for sd in job.get("dns_sd_configs") or []:
            for name in sd.get("names") or []:
                scraped[name] = sd.get("port")
        for static in job.get("static_configs") or []:
            for target in static.get("targets") or []:
                host, _, port = target.rpartition(":")
                scraped[host] = int(port)
    problems = [
        f"prometheus: scrapes compose service {name} on {scraped.get(name)}, it serves /metrics on {port}"
        for name, port in metrics_ports.items()
        if scraped.get(name) != port
    ]
    problems += [
        f"prometheus: scrapes {name}, not a compose service"
        for name in scraped
        if name not in doc["services"]
    ]
    return problems
