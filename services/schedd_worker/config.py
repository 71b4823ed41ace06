"""Configuration of a worker, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass

from schedd_coord.credentials import EtcdAuth
from schedd_exec.environment import TaskEnvironment
from schedd_rpc.tls import ClientTLS


@dataclass(frozen=True)
class WorkerConfig:
    #: Registry addresses (host:port, or a DNS name that resolves to several); the worker moves to
    #: the next one whenever its stream breaks.
    registries: tuple[str, ...]
    worker_id: str
    hostname: str
    incarnation: str
    queues: tuple[str, ...] = ("default",)
    capacity: int = 4
    code_version: str = ""
    #: etcd endpoints for the worker's liveness lease; empty: heartbeats only.
    etcd_endpoints: str = ""
    #: the etcd user (``SCHEDD_ETCD_USER``) of the liveness lease; None: no authentication
    etcd_auth: EtcdAuth | None = None
    lease_ttl: int = 5
    #: Seconds between SIGTERM and SIGKILL when a task must stop. With a liveness lease it must be
    #: shorter than the lease's margin (TTL minus renew deadline), so a task stopped when the lease
    #: lapses is dead before etcd can expire the lease.
    kill_grace: float = 1.0
    #: Seconds a SIGTERM'd worker lets running tasks finish before handing them back.
    drain_grace: float = 60.0
    #: Seconds a result waits, while other attempts run, for more to go in its message
    #: (``schedd_worker.result_linger``); 0: none.
    result_linger: float = 0.001
    #: Python processes at most; 0 for as many as the capacity.
    python_workers: int = 0
    #: Python processes kept warm while idle (at most ``python_workers``): the others start under
    #: load and go after a minute idle (``schedd_exec.python_pool``).
    python_warm: int = 1
    #: The metadata database, for transactional tasks only; empty: such tasks fail with a clear error.
    task_database_url: str = ""
    #: A token of role worker (``schedctl tokens create NAME --role worker``), sent on every stream.
    token: str = ""
    #: TLS to the registries: the CA to verify them and, for mutual TLS, this worker's certificate.
    tls: ClientTLS | None = None
    #: host:port to serve Prometheus metrics on (``/metrics``); empty for none.
    metrics_listen: str = ""
    #: Where code bundles are unpacked (``schedd_exec.bundle_cache``): a directory only the worker's
    #: user may use, refused at start-up otherwise; empty: ``$XDG_CACHE_HOME/schedd/bundles/<worker
    #: id>`` (``~/.cache/...`` without the variable).
    bundle_cache_dir: str = ""
    #: Bytes of unpacked bundles kept on disk (bundles in use are kept anyway).
    bundle_cache_bytes: int = 1024 * 1024 * 1024
    #: What task processes start with and as whom they run (``schedd_exec.environment``); None: the
    #: allowed part of the worker's environment, as the worker's user.
    task_environment: TaskEnvironment | None = None
