"""The servers of a :class:`schedd_devstack.services.Cluster`: the api, the registries and the web UI.

Each is started on a port picked by :mod:`schedd_devstack.ports` and waited for until it answers
(gRPC health checks with SERVING, or ``/healthz`` for the web UI). A server that exits because
another process bound its port first (between the pick and its own bind) is started again on new
ports, up to ``BIND_ATTEMPTS`` times; any other exit, and the deadline, raise
:class:`~schedd_devstack.process.ClusterError` with the server's log tail.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Mapping

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from schedd_coord import access
from schedd_devstack.cluster_base import BIND_ATTEMPTS, POLL_SECONDS, ClusterBase
from schedd_devstack.ports import LOCALHOST, free_port
from schedd_devstack.process import ClusterError, ServiceProcess

_HEALTH_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
]


class ServersMixin(ClusterBase):
    """Starting and waiting for the api, the registries and the web UI."""

    def add_registry(self, *, env: Mapping[str, str] | None = None, wait: bool = True) -> str:
        """Start one more registry (``registry-N``, identity ``registry-N-TAG``) on a free port and
        return its address; with ``wait``, once it answers health checks. ``env`` adds settings for
        this registry only."""
        self._require_running()
        proc = self._spawn_extra_registry(env=env)
        if wait:
            proc = self._await_extra_registry(proc, time.monotonic() + self.startup_timeout)
        return self._address_of(proc)

    def registry_of_worker(self, worker_id: str) -> str:
        """The identity (as in ``workers.registry``) of the registry the worker was started against."""
        return self.registry_ids[self.worker_registries[self._worker(worker_id).name]]

    # -- spawning -----------------------------------------------------------------------------------

    def _spawn_api(self, *, new_port: bool = False) -> None:
        port = self._shape.api_port if self._shape.api_port and not new_port else free_port()
        self.api_address = f"{LOCALHOST}:{port}"
        self.api = self._process(
            "api",
            "schedd_api.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_ETCD_ENDPOINTS": self.etcd_endpoints,  # for the leader status
                **self._etcd_user(access.API_USER),
                "SCHEDD_API_LISTEN": self.api_address,
                "SCHEDD_METRICS_LISTEN": self._metrics_address("api"),
            },
            kind="api",
        )
        self.api.start()

    def _start_web(self, deadline: float) -> None:
        """Start the web UI against the api and wait until its ``/healthz`` answers, on a new port when
        another process took the one picked."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            port = self._shape.web_port if self._shape.web_port and attempt == 1 else free_port()
            self.web_url = f"http://{LOCALHOST}:{port}"
            self.web = self._process(
                "web",
                "schedd_web.main",
                {
                    "SCHEDD_API": self.api_address,
                    "SCHEDD_WEB_LISTEN": f"{LOCALHOST}:{port}",
                    "SCHEDD_METRICS_LISTEN": self._metrics_address("web"),
                },
                kind="web",
            )
            self.web.start()
            if self._wait_http(self.web, f"{self.web_url}/healthz", deadline):
                return
        raise ClusterError(f"web could not bind a free port in {BIND_ATTEMPTS} attempts")

    def _spawn_registry(self, *, new_port: bool = False) -> None:
        port = self._shape.registry_port if self._shape.registry_port and not new_port else free_port()
        if self.registry is not None:
            self.registries.pop(self.registry_address, None)
            self.registry_ids.pop(self.registry_address, None)
        self.registry_address = f"{LOCALHOST}:{port}"
        identity = f"registry-{self.tag}"
        self.registry = self._process(
            "registry",
            "schedd_registry.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_REGISTRY_LISTEN": self.registry_address,
                "SCHEDD_REGISTRY_ID": identity,
                "SCHEDD_METRICS_LISTEN": self._metrics_address("registry"),
            },
            kind="registry",
        )
        # The first registry comes first in ``registries`` (workers are spread in this order).
        self.registries = {self.registry_address: self.registry, **self.registries}
        self.registry_ids[self.registry_address] = identity
        self.registry.start()

    def _spawn_extra_registry(
        self, *, env: Mapping[str, str] | None = None, name: str | None = None
    ) -> ServiceProcess:
        """A registry besides the first: ``registry-N`` (N >= 2) on a free port."""
        if name is None:
            self._registry_seq = max(self._registry_seq, 1) + 1
            name = f"registry-{self._registry_seq}"
        address = f"{LOCALHOST}:{free_port()}"
        identity = f"{name}-{self.tag}"
        proc = self._process(
            name,
            "schedd_registry.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_REGISTRY_LISTEN": address,
                "SCHEDD_REGISTRY_ID": identity,
                "SCHEDD_METRICS_LISTEN": self._metrics_address(name),
            },
            kind="registry",
            extra_env=env,
        )
        self.registries[address] = proc
        self.registry_ids[address] = identity
        proc.start()
        return proc

    def _address_of(self, registry: ServiceProcess) -> str:
        return next(a for a, p in self.registries.items() if p is registry)

    # -- waiting ------------------------------------------------------------------------------------

    def _await_extra_registry(self, proc: ServiceProcess, deadline: float) -> ServiceProcess:
        """Wait until a registry of ``_spawn_extra_registry`` serves, restarting it on a new port when
        another process grabbed its port; returns the process that serves."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            if self._wait_health(proc, self._address_of(proc), deadline):
                return proc
            if attempt == BIND_ATTEMPTS:
                break
            address = self._address_of(proc)
            del self.registries[address]
            del self.registry_ids[address]
            proc = self._spawn_extra_registry(env=proc.env, name=proc.name)
        raise ClusterError(f"{proc.name} could not bind a free port in {BIND_ATTEMPTS} attempts")

    def _await_serving(self, kind: str, deadline: float) -> None:
        """Wait for the api or registry to answer health checks, restarting it on a new port
        when another process grabbed its port between our pick and its bind."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            proc = self.api if kind == "api" else self.registry
            address = self.api_address if kind == "api" else self.registry_address
            assert proc is not None
            if self._wait_health(proc, address, deadline):
                return
            if attempt == BIND_ATTEMPTS:
                break
            if kind == "api":
                self._spawn_api(new_port=True)
            else:
                self._spawn_registry(new_port=True)
        raise ClusterError(f"{kind} could not bind a free port in {BIND_ATTEMPTS} attempts")

    def _wait_health(self, proc: ServiceProcess, address: str, deadline: float) -> bool:
        """True once ``proc`` answers SERVING at ``address``; False if it exited because its port
        was taken; raises ClusterError on any other exit and on the deadline."""
        serving = health_pb2.HealthCheckResponse.SERVING
        with grpc.insecure_channel(address, options=_HEALTH_CHANNEL_OPTIONS) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if not proc.alive:
                    if proc.lost_its_port():
                        return False
                    raise ClusterError(proc.describe_failure(f"{proc.name} exited during start-up"))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ClusterError(
                        proc.describe_failure(
                            f"{proc.name} did not answer health checks at {address} in time"
                        )
                    )
                try:
                    resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=min(1.0, remaining))
                    if resp.status == serving:
                        return True
                except grpc.RpcError:
                    pass
                time.sleep(POLL_SECONDS)

    def _wait_http(self, proc: ServiceProcess, url: str, deadline: float) -> bool:
        """True once ``url`` answers 200; False if ``proc`` exited because its port was taken; raises
        ClusterError on any other exit and on the deadline."""
        while True:
            if not proc.alive:
                if proc.lost_its_port():
                    return False
                raise ClusterError(proc.describe_failure(f"{proc.name} exited during start-up"))
            if time.monotonic() >= deadline:
                raise ClusterError(proc.describe_failure(f"{proc.name} did not answer {url} in time"))
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return True
            time.sleep(POLL_SECONDS)
