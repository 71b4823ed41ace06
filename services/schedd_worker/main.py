"""Entry point of a worker: ``schedd-worker``."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

import typer

from schedd_coord.credentials import read_etcd_auth
from schedd_coord.errors import EtcdAuthFailed
from schedd_core.errors import InvalidArgument
from schedd_exec.bundle_cache import BundleCacheUnsafe
from schedd_exec.environment import TaskEnvironment
from schedd_exec.process_secrets import protect_secrets, refuse_secret_flags
from schedd_rpc.server import stop_signals
from schedd_rpc.tls import ClientTLS
from schedd_telemetry.setup import setup_telemetry
from schedd_worker.agent import WorkerAgent, bounded
from schedd_worker.config import WorkerConfig
from schedd_worker.enrollment import own_token_or_exit
from schedd_worker.liveness import check_credentials, keep_liveness, liveness_timing

log = logging.getLogger("schedd.worker")

#: Read once, then removed from the environment (``schedd_exec.process_secrets``).
SECRET_VARIABLES = (
    "SCHEDD_WORKER_TOKEN",
    "SCHEDD_WORKER_TOKEN_FILE",
    "SCHEDD_ENROLL_TOKEN",
    "SCHEDD_ENROLL_TOKEN_FILE",
    "SCHEDD_TASK_DATABASE_URL",
    "SCHEDD_ETCD_PASSWORD",
)


async def serve(config: WorkerConfig) -> None:
    config = await own_token_or_exit(config, os.environ)
    protect_secrets("schedd-worker", SECRET_VARIABLES)
    stop = stop_signals()
    agent = WorkerAgent(config)
    if config.metrics_listen:
        agent.metrics.serve(config.metrics_listen)
    liveness = None
    if config.etcd_endpoints:
        await check_credentials(config.etcd_endpoints, config.etcd_auth)
        liveness = asyncio.create_task(
            keep_liveness(
                config.etcd_endpoints,
                config.worker_id,
                config.incarnation,
                liveness_timing(config.lease_ttl),
                agent.permit,
                agent.fence.poke,
                auth=config.etcd_auth,
            )
        )
    try:
        await agent.run(stop)
    finally:
        if liveness is not None:
            liveness.cancel()
            await bounded(asyncio.gather(liveness, return_exceptions=True), "the liveness lease")
    log.info("worker %s stopped after %d attempts", config.worker_id, agent.completed)


def default_kill_grace(lease_ttl: int, with_lease: bool) -> float:
    """1 s, or less where the liveness lease's margin is smaller: three quarters of it."""
    if not with_lease:
        return 1.0
    return min(1.0, 0.75 * liveness_timing(lease_ttl).margin)


def check_kill_grace(kill_grace: float, lease_ttl: int, with_lease: bool) -> None:
    """Raise typer.BadParameter unless a task stopped when the lease lapses dies before etcd can
    expire the lease (kill grace < TTL - renew deadline)."""
    if kill_grace < 0:
        raise typer.BadParameter("--kill-grace must not be negative")
    if with_lease:
        margin = liveness_timing(lease_ttl).margin
        if kill_grace >= margin:
            raise typer.BadParameter(
                f"--kill-grace ({kill_grace:g}s) must be shorter than the liveness lease's margin "
                f"({margin:.2f}s: TTL {lease_ttl}s minus its renew deadline), or a task stopped when the "
                "lease lapses could still run when its retry starts elsewhere"
            )


def parse_registries(value: str) -> tuple[str, ...]:
    registries = tuple(r.strip() for r in value.split(",") if r.strip())
    if not registries:
        raise typer.BadParameter("--registry needs at least one host:port")
    return registries


def cli(
    registry: str = typer.Option(
        "127.0.0.1:50052",
        envvar="SCHEDD_REGISTRY",
        help="host:port[,host:port...]; the worker fails over between them",
    ),
    worker_id: str = typer.Option("", envvar="SCHEDD_WORKER_ID", help="default: hostname-pid"),
    queues: str = typer.Option("default", envvar="SCHEDD_WORKER_QUEUES", help="comma-separated"),
    capacity: int = typer.Option(4, envvar="SCHEDD_WORKER_CAPACITY", min=1),
    etcd_endpoints: str = typer.Option(
        "", envvar="SCHEDD_ETCD_ENDPOINTS", help="for the liveness lease; without it, heartbeats only"
    ),
    lease_ttl: int = typer.Option(5, envvar="SCHEDD_WORKER_LEASE_TTL", min=2, help="seconds"),
    kill_grace: float | None = typer.Option(
        None,
        envvar="SCHEDD_KILL_GRACE",
        help="seconds from SIGTERM to SIGKILL of a task that must stop (default: 1, less to fit the lease)",
    ),
    drain_grace: float = typer.Option(
        60.0, envvar="SCHEDD_DRAIN_GRACE", help="seconds SIGTERM lets tasks finish"
    ),
    result_linger_ms: float = typer.Option(
        1.0, envvar="SCHEDD_RESULT_LINGER_MS", min=0.0, max=1000.0, help="ms a result may wait (0: none)"
    ),
    python_workers: int = typer.Option(
        0, envvar="SCHEDD_PYTHON_WORKERS", min=0, help="0: as many as capacity"
    ),
    python_warm: int = typer.Option(
        1, envvar="SCHEDD_PYTHON_WARM", min=1, help="Python processes kept warm while idle"
    ),
    task_database_url: str = typer.Option(
        "",
        envvar="SCHEDD_TASK_DATABASE_URL",
        help="the metadata database as the task role (a member of schedd_tasks), for transactional tasks; "
        "set it in the environment: as a flag it is refused",
    ),
    token_file: str = typer.Option(
        "", envvar="SCHEDD_WORKER_TOKEN_FILE", help="a file holding the worker token (or SCHEDD_WORKER_TOKEN)"
    ),
    tls_ca: str = typer.Option(
        "", envvar="SCHEDD_TLS_CA_FILE", help="CA that signed the registries' certificates"
    ),
    tls_cert: str = typer.Option(
        "", envvar="SCHEDD_TLS_CERT_FILE", help="this worker's certificate (mutual TLS)"
    ),
    tls_key: str = typer.Option("", envvar="SCHEDD_TLS_KEY_FILE", help="its key"),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="[host:]port (loopback)"),
    bundle_cache_dir: str = typer.Option(
        "",
        envvar="SCHEDD_BUNDLE_CACHE_DIR",
        help="a private directory to unpack code bundles in (default: $XDG_CACHE_HOME/schedd/bundles/ID)",
    ),
    bundle_cache_mib: int = typer.Option(
        1024, envvar="SCHEDD_BUNDLE_CACHE_MIB", min=0, help="MiB of unpacked code bundles kept on disk"
    ),
    task_user: str = typer.Option(
        "", envvar="SCHEDD_TASK_USER", help="run tasks as this user (a worker started as root only)"
    ),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Run a worker: connect to a registry and run the tasks it assigns. SIGTERM drains it.

    The worker token comes from ``SCHEDD_WORKER_TOKEN`` (or the file ``SCHEDD_WORKER_TOKEN_FILE``);
    without one, an enrollment token (``SCHEDD_ENROLL_TOKEN``, ``SCHEDD_ENROLL_TOKEN_FILE``) gets the
    worker a token of its own (``schedd_worker.enrollment``). Logs: ``SCHEDD_LOG_FORMAT`` (``text``
    or ``json``); tracing: the standard ``OTEL_*`` variables.
    """
    refuse_secret_flags("schedd-worker", {"--task-database-url": "SCHEDD_TASK_DATABASE_URL"})
    setup_telemetry("schedd-worker", log_level)
    # The parameters of this function are exactly the fields of WorkerOptions.
    config = worker_config(WorkerOptions(**locals()))
    try:
        # asyncio's loop, not uvloop's: the worker spawns task processes, and uvloop spawns with fork(),
        # which runs gRPC's fork handlers in the child (shell tasks died of SIGSEGV under load).
        asyncio.run(serve(config))
    except (EtcdAuthFailed, BundleCacheUnsafe) as exc:
        typer.echo(f"schedd-worker: {exc}", err=True)
        raise typer.Exit(2) from None


@dataclass(frozen=True)
class WorkerOptions:
    """The options of ``schedd-worker`` as given (flags or environment), before they are checked."""

    registry: str
    worker_id: str
    queues: str
    capacity: int
    etcd_endpoints: str
    lease_ttl: int
    kill_grace: float | None
    drain_grace: float
    result_linger_ms: float
    python_workers: int
    python_warm: int
    task_database_url: str
    token_file: str
    tls_ca: str
    tls_cert: str
    tls_key: str
    metrics_listen: str
    bundle_cache_dir: str
    bundle_cache_mib: int
    task_user: str
    log_level: str


def worker_config(options: WorkerOptions) -> WorkerConfig:
    """The worker's configuration from its options; typer.BadParameter for one that does not hold."""
    hostname = socket.gethostname()
    with_lease = bool(options.etcd_endpoints)
    lease_ttl = options.lease_ttl
    grace = default_kill_grace(lease_ttl, with_lease) if options.kill_grace is None else options.kill_grace
    check_kill_grace(grace, lease_ttl, with_lease)
    try:
        etcd_auth = read_etcd_auth(os.environ)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return WorkerConfig(
        registries=parse_registries(options.registry),
        worker_id=options.worker_id or f"{hostname}-{os.getpid()}",
        hostname=hostname,
        incarnation=uuid.uuid4().hex,
        queues=tuple(q.strip() for q in options.queues.split(",") if q.strip()),
        capacity=options.capacity,
        etcd_endpoints=options.etcd_endpoints,
        etcd_auth=etcd_auth,
        lease_ttl=lease_ttl,
        kill_grace=grace,
        drain_grace=options.drain_grace,
        result_linger=options.result_linger_ms / 1000.0,
        python_workers=options.python_workers,
        python_warm=options.python_warm,
        task_database_url=options.task_database_url,
        token=read_token(options.token_file),
        tls=client_tls(options.tls_ca, options.tls_cert, options.tls_key),
        metrics_listen=options.metrics_listen,
        bundle_cache_dir=options.bundle_cache_dir,
        bundle_cache_bytes=options.bundle_cache_mib * 1024 * 1024,
        task_environment=task_environment(options.task_user),
    )


def read_token(token_file: str) -> str:
    if token_file:
        try:
            return Path(token_file).read_text().strip()
        except OSError as exc:
            raise typer.BadParameter(f"cannot read the token file {token_file!r}: {exc.strerror}") from None
    return os.environ.get("SCHEDD_WORKER_TOKEN", "").strip()


def task_environment(task_user: str) -> TaskEnvironment:
    """What tasks start with (``schedd_exec.environment``), as ``task_user`` when given."""
    try:
        return TaskEnvironment.for_runner(os.environ, task_user)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def client_tls(ca: str, cert: str, key: str) -> ClientTLS | None:
    try:
        return ClientTLS.from_values(ca, cert, key, prefix="SCHEDD_TLS_")
    except InvalidArgument as exc:
        raise typer.BadParameter(str(exc)) from None


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
