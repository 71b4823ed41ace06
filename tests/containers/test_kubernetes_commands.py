"""Every container of the schedd image in the rendered overlays (dev, production, production-hpa), run
on the image with its exact command, environment, volumes and security context: the Jobs exit 0,
every probe passes as the kubelet would run it, and a worker's preStop hook drains it to exit 0
within its termination grace. Kubernetes itself cannot run here; this is what of a pod the image
decides."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from docker.models.containers import Container
from docker.models.networks import Network
from testcontainers.core.docker_client import DockerClient

from schedd_auth.tokens import new_token
from tests.containers.engine import ETCD_IMAGE, POSTGRES_IMAGE, SCHEDD_IMAGE, Engine, poll
from tests.containers.kubernetes_pods import Pod, exit_code, pods
from tests.deploy.sources import kubectl, render

OVERLAYS = ("dev", "production", "production-hpa")
ETCD_USERS = ("root", "schedd-scheduler", "schedd-api", "schedd-worker")


class Site:
    """A network with the Services the pods name, and the pods started on it."""

    def __init__(self, tmp: Path) -> None:
        self.docker = DockerClient().client
        self.prefix = f"schedd-k8s-{os.getpid()}"
        self.network: Network = self.docker.networks.create(self.prefix)
        self.tmp = tmp
        self.containers: list[Container] = []
        self.extra_hosts: dict[str, str] = {}
        self.secrets: dict[str, dict[str, str]] = {
            "schedd-database": {"password": secrets.token_urlsafe(18)},
            "schedd-bootstrap": {"token": str(new_token())},
            "schedd-etcd": {u: secrets.token_urlsafe(18) for u in ETCD_USERS},
            "schedd-worker-enroll": {"token": ""},
        }

    def run(self, name: str, image: str, aliases: set[str], **options: Any) -> Container:
        container = self.docker.containers.create(
            image,
            name=f"{self.prefix}-{name}",
            network=self.network.name,
            networking_config={
                self.network.name: self.docker.api.create_endpoint_config(aliases=sorted(aliases))
            },
            detach=True,
            **options,
        )
        self.containers.append(container)
        container.start()
        return container

    def start_services(self, hosts: dict[str, set[str]]) -> None:
        password = self.secrets["schedd-database"]["password"]
        env = {"POSTGRES_USER": "schedd", "POSTGRES_DB": "schedd", "POSTGRES_PASSWORD": password}
        database = self.run("postgres", POSTGRES_IMAGE, hosts["postgres"], environment=env)
        member = sorted(hosts["etcd"])[0]
        etcd_command = [
            "etcd", f"--name={member.split('.')[0]}", "--data-dir=/tmp/etcd",
            "--listen-client-urls=http://0.0.0.0:2379", f"--advertise-client-urls=http://{member}:2379",
        ]  # fmt: skip
        etcd = self.run("etcd", ETCD_IMAGE, hosts["etcd"], command=etcd_command)
        # Names with dots (postgres.example.internal) go into the pods' /etc/hosts as well: the
        # network's DNS answers them only after a lookup upstream has timed out.
        for container, names in ((database, hosts["postgres"]), (etcd, hosts["etcd"])):
            container.reload()
            address = container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
            self.extra_hosts.update({name: address for name in names if "." in name})
        poll("PostgreSQL", lambda: database.exec_run(["pg_isready", "-U", "schedd"]).exit_code == 0, 60, 0.3)

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

        return poll("an enrollment token", create, timeout=90, interval=1.0)

    def remove(self) -> None:
        for container in self.containers:
            container.remove(force=True)
        self.network.remove()


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
    kubectl()
    started = Site(tmp_path)
    try:
        yield started
    finally:
        started.remove()


def _probe(pod: Pod, container: Container) -> None:
    for kind, command in pod.probe_commands():

        def passes(command: list[str] = command) -> bool:
            return bool(container.exec_run(command).exit_code == 0)

        poll(f"{pod.where}: {kind} {command}", passes, timeout=90, interval=0.5)


def test_every_pod_of_the_overlays_runs_on_the_image(site: Site) -> None:
    all_pods = pods({overlay: render(overlay) for overlay in OVERLAYS})
    hosts = _hosts(all_pods, site.secrets)
    site.start_services(hosts)
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
