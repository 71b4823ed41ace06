"""A schedd cluster in containers on three networks, for faults across real containers and networks:

    etcd network      etcd, the api, the schedulers, the workers (their liveness leases)
    database network  PostgreSQL, migrate, the api, the schedulers, the registry
    worker network    the registry and the workers

so that ``network disconnect`` cuts exactly one path (a scheduler from etcd while it still reaches
PostgreSQL; a worker from its registry). Containers are started through the Docker API of the
engine (podman's or Docker's) with testcontainers' client; PostgreSQL and the api are published on
loopback ports for the checks and schedctl. Services run in development mode (``SCHEDD_AUTH=none``,
etcd without users), as the chaos suite's processes do.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import yaml
from docker.models.containers import Container
from docker.models.networks import Network
from testcontainers.core.docker_client import DockerClient

from tests.containers.engine import ETCD_IMAGE, POSTGRES_IMAGE, ROOT, SCHEDD_IMAGE, Engine
from tests.polling import wait_until

TTL = 2
FAST_LEASE = {"SCHEDD_LEASE_TTL": str(TTL), "SCHEDD_RENEW_DEADLINE": "1.4"}
PASSWORD = "fault-test"
MARKS = "/marks"


class FaultCluster:
    def __init__(
        self, engine: Engine, name: str, marks: Path, service_env: dict[str, str] | None = None
    ) -> None:
        self.engine = engine
        self.service_env = service_env or {}
        self.name = name
        self.marks = marks
        self.docker = DockerClient().client
        self.networks: dict[str, Network] = {}
        self.containers: dict[str, Container] = {}
        self.database_port = 0
        self.api_port = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, schedulers: int = 2, workers: int = 2) -> FaultCluster:
        for net in ("etcd", "db", "work"):
            self.networks[net] = self.docker.networks.create(f"{self.name}-{net}")
        self._run(
            "etcd",
            ETCD_IMAGE,
            ["etcd", "--name=etcd", "--data-dir=/tmp/etcd", "--listen-client-urls=http://0.0.0.0:2379",
             "--advertise-client-urls=http://etcd:2379"],
            {},
            ["etcd"],
        )  # fmt: skip
        self._run(
            "postgres",
            POSTGRES_IMAGE,
            ["postgres"],
            {"POSTGRES_USER": "schedd", "POSTGRES_DB": "schedd", "POSTGRES_PASSWORD": PASSWORD},
            ["db"],
            ports={"5432/tcp": ("127.0.0.1", None)},
        )
        self.database_port = int(self._published("postgres", "5432/tcp"))
        wait_until(
            "PostgreSQL accepting connections",
            lambda: self.fetch("SELECT 1"),
            60,
            interval=0.3,
            retry_on=(Exception,),
        )
        migrate = self._run("migrate", SCHEDD_IMAGE, ["schedd-migrate"], self._db_env(), ["db"])
        assert migrate.wait(timeout=120)["StatusCode"] == 0, migrate.logs().decode()[-2000:]
        self._run(
            "api",
            SCHEDD_IMAGE,
            ["schedd-api"],
            {**self._db_env(), **self._etcd_env(), "SCHEDD_API_LISTEN": "0.0.0.0:50051",
             "SCHEDD_DAGS_PAUSED_AT_CREATION": "false"},
            ["etcd", "db"],
            ports={"50051/tcp": ("127.0.0.1", None)},
        )  # fmt: skip
        self.api_port = int(self._published("api", "50051/tcp"))
        self._run(
            "registry",
            SCHEDD_IMAGE,
            ["schedd-registry"],
            {**self._db_env(), "SCHEDD_REGISTRY_LISTEN": "0.0.0.0:50052", "SCHEDD_REGISTRY_ID": "registry"},
            ["db", "work"],
        )
        for i in range(1, schedulers + 1):
            self.add_scheduler(f"scheduler-{i}")
        for i in range(1, workers + 1):
            self.add_worker(f"worker-{i}")
        wait_until("a leader", lambda: self.fence()[0] > 0, 60, interval=0.2, retry_on=(Exception,))
        wait_until(
            "the api",
            lambda: self.schedctl("dags", "list").returncode == 0,
            60,
            interval=0.5,
            retry_on=(Exception,),
        )
        return self

    def add_scheduler(self, name: str) -> Container:
        env = {**self._db_env(), **self._etcd_env(), **FAST_LEASE, "SCHEDD_SCHEDULER_ID": name}
        return self._run(name, SCHEDD_IMAGE, ["schedd-scheduler"], env, ["etcd", "db"])

    def add_worker(self, name: str) -> Container:
        env = {
            **self._etcd_env(),
            "SCHEDD_REGISTRY": "registry:50052",
            "SCHEDD_WORKER_ID": name,
            "SCHEDD_WORKER_CAPACITY": "4",
        }
        volumes = {str(self.marks): {"bind": MARKS, "mode": "rw"}}
        return self._run(name, SCHEDD_IMAGE, ["schedd-worker"], env, ["work", "etcd"], volumes=volumes)

    def stop(self) -> None:
        for container in self.containers.values():
            try:
                container.remove(force=True)
            except Exception as exc:  # already gone
                print(f"removing {container.name}: {exc}", file=sys.stderr)
        for network in self.networks.values():
            try:
                network.remove()
            except Exception as exc:
                print(f"removing network {network.name}: {exc}", file=sys.stderr)

    def __enter__(self) -> FaultCluster:
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        if exc_type is not None:
            for name, container in self.containers.items():
                try:
                    tail = container.logs(tail=15).decode(errors="replace")
                except Exception as exc:
                    tail = repr(exc)
                print(f"--- {name}\n{tail}", file=sys.stderr)
        self.stop()

    # -- what the checks and faults use ------------------------------------------------------------

    @property
    def database_url(self) -> str:
        return f"postgresql://schedd:{PASSWORD}@127.0.0.1:{self.database_port}/schedd"

    def fetch(self, query: str, *args: object) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            conn = await asyncpg.connect(self.database_url, timeout=5)
            try:
                return [dict(r) for r in await conn.fetch(query, *args, timeout=10)]
            finally:
                await conn.close()

        return asyncio.run(run())

    def fetchval(self, query: str, *args: object) -> Any:
        rows = self.fetch(query, *args)
        return next(iter(rows[0].values())) if rows else None

    def fence(self) -> tuple[int, str]:
        rows = self.fetch("SELECT token, holder FROM scheduler_fence WHERE id = 1")
        return (int(rows[0]["token"]), str(rows[0]["holder"])) if rows else (0, "")

    def container(self, name: str) -> Container:
        return self.containers[name]

    def leader(self) -> str:
        return self.fence()[1]

    def pid(self, name: str) -> int:
        container = self.containers[name]
        container.reload()
        return int(container.attrs["State"]["Pid"])

    def schedctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SCHEDD_API": f"127.0.0.1:{self.api_port}"}
        schedctl = str(Path(sys.executable).parent / "schedctl")
        return subprocess.run(
            [schedctl, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
        )

    def impair(self, name: str, network: str, delay: str, loss: float) -> str:
        """Delay (``tc netem``) and drop a share of the packets on ``name``'s interface in ``network``,
        both ways, from the host in the container's network namespace (the image has no tc). Where
        the kernel has no netem, the loss alone (nftables' random drop); what was applied is returned."""
        device, pid = self._device(name, network), str(self.pid(name))
        netem = [
            "nsenter",
            "-t",
            pid,
            "-n",
            "tc",
            "qdisc",
            "replace",
            "dev",
            device,
            "root",
            "netem",
            "delay",
        ]
        applied = subprocess.run(
            [*netem, *delay.split(), "loss", f"{loss:g}%"], capture_output=True, text=True
        )
        if applied.returncode == 0:
            return f"netem delay {delay} loss {loss:g}%"
        for rule in (["OUTPUT", "-o", device], ["INPUT", "-i", device]):
            subprocess.run(
                ["nsenter", "-t", pid, "-n", "iptables", "-A", *rule, "-m", "statistic", "--mode", "random",
                 "--probability", f"{loss / 100:g}", "-j", "DROP"],
                check=True,
            )  # fmt: skip
        return f"loss {loss:g}% each way (no delay: {applied.stderr.strip()})"

    def restore(self, name: str, network: str) -> None:
        device, pid = self._device(name, network), str(self.pid(name))
        subprocess.run(
            ["nsenter", "-t", pid, "-n", "tc", "qdisc", "del", "dev", device, "root"], capture_output=True
        )
        subprocess.run(["nsenter", "-t", pid, "-n", "iptables", "-F"], capture_output=True)

    def _device(self, name: str, network: str) -> str:
        ip = self._ip(name, network)
        links = subprocess.run(
            ["nsenter", "-t", str(self.pid(name)), "-n", "ip", "-o", "-4", "addr", "show"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        (device,) = [line.split()[1] for line in links.splitlines() if f" {ip}/" in line]
        return device

    # -- internals ---------------------------------------------------------------------------------

    def _db_env(self) -> dict[str, str]:
        return {
            "SCHEDD_DATABASE_URL": "postgresql+asyncpg://schedd@postgres:5432/schedd",
            "PGPASSWORD": PASSWORD,
        }

    def _etcd_env(self) -> dict[str, str]:
        return {"SCHEDD_ETCD_ENDPOINTS": "etcd:2379"}

    def _run(
        self,
        name: str,
        image: str,
        command: list[str],
        env: dict[str, str],
        networks: list[str],
        **kwargs: Any,
    ) -> Container:
        """Create the container on its first network, connect the others (with its name as an alias
        on each), then start it: it sees every network from its first instant."""
        first, *others = networks
        container = self.docker.containers.create(
            image,
            command,
            name=f"{self.name}-{name}",
            environment={"SCHEDD_AUTH": "none", "SCHEDD_LOG_LEVEL": "INFO", **self.service_env, **env},
            network=self.networks[first].name,
            networking_config={
                self.networks[first].name: self.docker.api.create_endpoint_config(aliases=[name])
            },
            detach=True,
            **kwargs,
        )
        for net in others:
            self.networks[net].connect(container, aliases=[name])
        container.start()
        self.containers[name] = container
        return container

    def _published(self, name: str, port: str) -> str:
        def lookup() -> str | None:
            container = self.containers[name]
            container.reload()
            bindings = container.attrs["NetworkSettings"]["Ports"].get(port) or []
            return bindings[0]["HostPort"] if bindings else None

        return wait_until(f"{name}'s published port {port}", lookup, 20, interval=0.1, retry_on=(Exception,))

    def _ip(self, name: str, network: str) -> str:
        container = self.containers[name]
        container.reload()
        return str(container.attrs["NetworkSettings"]["Networks"][self.networks[network].name]["IPAddress"])


def register(cluster: FaultCluster, path: Path, spec: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(spec))
    result = cluster.schedctl("dags", "register", str(path))
    assert result.returncode == 0, result.stderr


def trigger(cluster: FaultCluster, dag_id: str, run_id: str) -> None:
    result = cluster.schedctl("runs", "trigger", dag_id, "--run-id", run_id)
    assert result.returncode == 0, result.stderr


def attempts(cluster: FaultCluster, dag_id: str) -> list[tuple[str, str, str]]:
    """(task, worker, state) of every attempt of the DAG, in the order they were claimed."""
    rows = cluster.fetch(
        "SELECT ti.task_id, a.worker_id, a.state FROM task_attempts a "
        "JOIN task_instances ti ON ti.id = a.ti_id WHERE ti.dag_id = $1 ORDER BY a.claimed_at",
        dag_id,
    )
    return [(r["task_id"], r["worker_id"], r["state"]) for r in rows]
