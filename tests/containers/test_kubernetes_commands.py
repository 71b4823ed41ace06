"""Every container of the schedd image in the rendered overlays (dev, production, production-hpa), run
on the image with its exact command, environment, volumes and security context, against the compose
stack's own PostgreSQL and etcd (TLS and authentication on, users made by compose's etcd-init) with
compose's secrets laid out as the Kubernetes Secrets: one source of truth for both. The Jobs exit 0,
every probe passes as the kubelet would run it, and a worker's preStop hook drains it to exit 0
within its termination grace. Kubernetes itself cannot run here; this is what of a pod the image
decides."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from docker.models.containers import Container
from testcontainers.core.docker_client import DockerClient

from tests.containers.engine import SCHEDD_IMAGE, Engine
from tests.containers.kubernetes_pods import Pod, exit_code, pods
from tests.containers.stack import Stack, stack
from tests.deploy.sources import kubectl, render
from tests.polling import wait_until

OVERLAYS = ("dev", "production", "production-hpa")
ETCD_USERS = ("root", "schedd-scheduler", "schedd-api", "schedd-worker")


def kubernetes_secrets(compose: Stack) -> dict[str, dict[str, str]]:
    """The Secrets docs/deploy.md has users create, filled from what deploy/make-secrets.sh made for
    compose."""

    def read(name: str) -> str:
        return (compose.secrets / name).read_text().strip()

    return {
        "schedd-database": {"password": read("postgres-password")},
        "schedd-bootstrap": {"token": read("bootstrap-token")},
        "schedd-etcd": {user: read(f"etcd/{user}") for user in ETCD_USERS},
        "schedd-etcd-tls": {
            "ca.crt": read("tls/ca.crt") + "\n",
            "tls.crt": read("tls/etcd.crt") + "\n",
            "tls.key": read("tls/etcd.key") + "\n",
        },
        "schedd-worker-enroll": {"token": ""},
    }


class Site:
    """The pods, started on the compose stack's network beside its PostgreSQL and etcd."""

    def __init__(self, compose: Stack, tmp: Path) -> None:
        self.docker = DockerClient().client
        self.prefix = f"schedd-k8s-{os.getpid()}"
        self.tmp = tmp
        self.containers: list[Container] = []
        self.extra_hosts: dict[str, str] = {}
        self.secrets = kubernetes_secrets(compose)
        (self.postgres,) = compose.containers("postgres", running=True)
        (self.etcd,) = compose.containers("etcd", running=True)
        networks = self.docker.containers.get(self.postgres).attrs["NetworkSettings"]["Networks"]
        self.network = next(iter(networks))

    def run(self, name: str, image: str, aliases: set[str], **options: Any) -> Container:
        container = self.docker.containers.create(
            image,
            name=f"{self.prefix}-{name}",
            network=self.network,
            networking_config={self.network: self.docker.api.create_endpoint_config(aliases=sorted(aliases))},
            detach=True,
            **options,
        )
        self.containers.append(container)
        container.start()
        return container

    def name_services(self, hosts: dict[str, set[str]]) -> None:
        """The overlays' names of the database and etcd that compose does not answer (production's
        postgres.example.internal) go into the pods' /etc/hosts, pointing at compose's containers."""
        for service, names in ((self.postgres, hosts["postgres"]), (self.etcd, hosts["etcd"])):
            address = self.docker.containers.get(service).attrs["NetworkSettings"]["Networks"][self.network]
            self.extra_hosts.update({name: address["IPAddress"] for name in names - {"postgres", "etcd"}})

    def start_pod(self, pod: Pod, aliases: set[str]) -> Container:
        name = f"{pod.overlay}-{pod.name}-{pod.container['name']}"
        binds, tmpfs = pod.volumes(self.secrets, self.tmp / name)
        options: dict[str, Any] = {"command": pod.args(), **pod.create_options()}
        if pod.command() is not None:
            options["entrypoint"] = pod.command()
        return self.run(
            name,
            SCHEDD_IMAGE,
            aliases,
            environment=pod.env(self.secrets, f"{self.prefix}-{name}"),
            volumes=binds,
            tmpfs=tmpfs,
            extra_hosts=self.extra_hosts,
            **options,
        )

    def enroll_token(self) -> str:
        """As docs/deploy.md makes it: schedctl as the bootstrap admin, against the api's Service (asked
        again while the api is still busy starting: every call has a 10 s deadline)."""
        env = {"SCHEDD_API": "schedd-api:50051", "SCHEDCTL_TOKEN": self.secrets["schedd-bootstrap"]["token"]}
        attempts = iter(range(1, 100))

        def create() -> str | None:
            n = next(attempts)
            command = ["schedctl", "tokens", "create", f"k8s-workers-{n}", "--role", "enroll", "-o", "json"]
            cli = self.run(f"schedctl-{n}", SCHEDD_IMAGE, set(), command=command, environment=env)
            if exit_code(cli, timeout=60) != 0:
                print(f"schedctl, attempt {n}: {cli.logs(stdout=False).decode().strip()}")
                return None
            return str(json.loads(cli.logs(stderr=False).decode())["secret"])

        return wait_until("an enrollment token", create, 90, interval=1.0, retry_on=(Exception,))

    def remove(self) -> None:
        for container in self.containers:
            container.remove(force=True)


def _hosts(all_pods: list[Pod], filled: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    hosts: dict[str, set[str]] = {"postgres": set(), "etcd": set(), "registry": set()}
    for pod in all_pods:
        env = pod.env(filled, "pod")
        if env.get("SCHEDD_DATABASE_URL"):
            hosts["postgres"].add(str(urlsplit(env["SCHEDD_DATABASE_URL"]).hostname))
        for endpoint in filter(None, env.get("SCHEDD_ETCD_ENDPOINTS", "").split(",")):
            hosts["etcd"].add(str(urlsplit(endpoint if "//" in endpoint else f"//{endpoint}").hostname))
        if env.get("SCHEDD_REGISTRY"):
            hosts["registry"].add(env["SCHEDD_REGISTRY"].rsplit(":", 1)[0])
    return hosts


@pytest.fixture
def site(container_engine: Engine, tmp_path: Path) -> Iterator[Site]:
    """compose's PostgreSQL and etcd up and healthy, etcd's users made by compose's etcd-init."""
    kubectl()
    with stack(container_engine, tmp_path, f"schedd-k8s-compose-{os.getpid()}") as compose:
        subprocess.run([str(compose.deploy / "make-secrets.sh")], check=True, capture_output=True)
        compose.compose("up", "--detach", "postgres", "etcd", "etcd-init")
        compose.wait_healthy()
        (init,) = compose.containers("etcd-init")
        wait_until(
            "compose's etcd-init done",
            lambda: _exited(container_engine, init),
            120,
            interval=0.5,
            retry_on=(Exception,),
        )
        assert compose.exit_code(init) == 0, container_engine.run("logs", init).stderr
        started = Site(compose, tmp_path)
        try:
            yield started
        finally:
            started.remove()


def _exited(engine: Engine, name: str) -> bool:
    return engine.run("inspect", "--format", "{{.State.Status}}", name).stdout.strip() == "exited"


def _probe(pod: Pod, container: Container) -> None:
    for kind, command in pod.probe_commands():

        def passes(command: list[str] = command) -> bool:
            return bool(container.exec_run(command).exit_code == 0)

        wait_until(f"{pod.where}: {kind} {command}", passes, 90, interval=0.5, retry_on=(Exception,))


def test_every_pod_of_the_overlays_runs_on_the_image(site: Site) -> None:
    all_pods = pods({overlay: render(overlay) for overlay in OVERLAYS})
    hosts = _hosts(all_pods, site.secrets)
    assert {"postgres", "etcd"} <= hosts["postgres"] | hosts["etcd"], hosts
    site.name_services(hosts)
    workers: list[tuple[Pod, Container]] = []
    for pod in all_pods:
        if pod.name.startswith("schedd-worker") and not site.secrets["schedd-worker-enroll"]["token"]:
            site.secrets["schedd-worker-enroll"]["token"] = site.enroll_token()
        aliases = {"schedd-registry": hosts["registry"], "schedd-api": {"schedd-api"}}.get(pod.name, set())
        started = time.monotonic()
        container = site.start_pod(pod, aliases)
        if pod.kind == "Job":
            code = exit_code(container, timeout=120)
            assert code == 0, f"{pod.where} exited {code}: {container.logs(tail=20).decode()}"
        else:
            _probe(pod, container)
        outcome = "done" if pod.kind == "Job" else "probes pass"
        print(f"\n{pod.where}: {outcome} in {time.monotonic() - started:.1f} s")
        if pod.pre_stop():
            workers.append((pod, container))
    assert workers, "no worker has a preStop hook"
    for pod, container in workers:
        container.exec_run(pod.pre_stop(), detach=True)
        code = exit_code(container, timeout=pod.grace())
        assert code == 0, f"{pod.where}: preStop drained it to exit {code}"
