"""Entry point of the scheduler service: ``schedd-scheduler``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from dataclasses import dataclass

import typer

from schedd_coord.client import EtcdClient
from schedd_coord.credentials import read_etcd_auth
from schedd_coord.lease import LeaseTiming
from schedd_core.errors import Unavailable
from schedd_core.limits import DEFAULT_MAX_MAP_LENGTH
from schedd_exec.environment import TaskEnvironment
from schedd_exec.process_secrets import protect_secrets
from schedd_faults import FaultPoints
from schedd_rpc.server import stop_signals
from schedd_scheduler.config import SchedulerConfig
from schedd_scheduler.executors import ExecutorKind, make_executor
from schedd_scheduler.leadership import Replica
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_scheduler.pending import PendingRuns
from schedd_scheduler.watcher_config import parse_watchers
from schedd_store import channels
from schedd_store.engine import make_engine
from schedd_store.notify import Listener
from schedd_store.observe import warm_up
from schedd_store.retention import DAY, Retention
from schedd_telemetry.setup import setup_telemetry

log = logging.getLogger("schedd.scheduler")

#: Read once, then removed from the environment; never accepted as flags (``schedd_exec.process_secrets``).
SECRET_VARIABLES = (
    "SCHEDD_DATABASE_URL",
    "SCHEDD_TASK_DATABASE_URL",
    "SCHEDD_ETCD_PASSWORD",
    "SCHEDD_ASSET_WATCHERS",
)
SECRET_FLAGS = {"--database-url": "SCHEDD_DATABASE_URL", "--task-database-url": "SCHEDD_TASK_DATABASE_URL"}


async def serve(config: SchedulerConfig) -> None:
    engine = make_engine(
        config.database_url,
        pool_size=config.db_pool_size,
        application_name="schedd-scheduler",
        server_settings=config.session_settings(),
    )
    etcd = EtcdClient(config.etcd_endpoints, auth=config.etcd_auth)
    stop = stop_signals()
    try:
        await _check_dependencies(engine, etcd)
        pending = PendingRuns()
        metrics = SchedulerMetrics()
        if config.metrics_listen:
            metrics.serve(config.metrics_listen)
        replica = Replica(config, engine, etcd, pending, metrics, FaultPoints.from_env(os.environ))
        executor = make_executor(
            ExecutorKind(config.executor),
            engine,
            identity=config.identity,
            parallelism=config.parallelism,
            silence_limit=config.zombie_threshold,
            task_database_url=config.task_database_url,
            environment=config.task_environment,
        )

        def runs_notified(payload: str) -> None:
            pending.add_payload(payload)
            replica.on_runs_notified(payload)

        listener = Listener(
            config.database_url,
            {
                channels.RUNS: runs_notified,
                channels.RUNS_HANDED_OFF: pending.add_handed_off_payload,
                channels.LOST: replica.on_lost,
                channels.QUEUED: executor.wake,
                channels.DAGS: replica.on_dag_changed,
                channels.BACKFILLS: replica.on_backfill_changed,
                channels.ASSETS: replica.on_assets_queued,
            },
            on_connect=replica.on_listener_reconnected,
        )
        await listener.start()
        executing = asyncio.create_task(executor.run(), name="executor")
        log.info("scheduler %s campaigning", config.identity)
        await replica.run(stop)
        executing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await executing
        await listener.stop()
    finally:
        await etcd.close()
        await engine.dispose()


async def _check_dependencies(engine: object, etcd: EtcdClient) -> None:
    """Fail fast, with a clear message, when PostgreSQL or etcd cannot be reached at start-up."""
    try:
        await asyncio.wait_for(warm_up(engine), 10)  # type: ignore[arg-type]
    except (OSError, TimeoutError) as exc:
        raise Unavailable(f"PostgreSQL is unreachable: {exc}") from exc
    await etcd.ping()


def cli(
    database_url: str = typer.Option(
        ..., envvar="SCHEDD_DATABASE_URL", help="set it in the environment: as a flag it is refused"
    ),
    etcd_endpoints: str = typer.Option(..., envvar="SCHEDD_ETCD_ENDPOINTS", help="host:port[,host:port]"),
    identity: str = typer.Option("", envvar="SCHEDD_SCHEDULER_ID", help="default: hostname-pid"),
    lease_ttl: int = typer.Option(LeaseTiming.ttl, envvar="SCHEDD_LEASE_TTL", help="seconds"),
    renew_deadline: float = typer.Option(
        LeaseTiming.renew_deadline, envvar="SCHEDD_RENEW_DEADLINE", help="seconds"
    ),
    retry_period: float = typer.Option(
        LeaseTiming.retry_period, envvar="SCHEDD_RETRY_PERIOD", help="seconds between lease keep-alives"
    ),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="[host:]port (loopback)"),
    zombie_threshold: float = typer.Option(
        30.0,
        envvar="SCHEDD_ZOMBIE_THRESHOLD",
        help="seconds unheard before an attempt is lost, for attempts whose worker has no record",
    ),
    executor: str = typer.Option(
        "distributed", envvar="SCHEDD_EXECUTOR", help="where tasks run: distributed, local or sequential"
    ),
    parallelism: int = typer.Option(
        8, envvar="SCHEDD_PARALLELISM", min=1, help="tasks the local executor runs"
    ),
    task_database_url: str = typer.Option(
        "",
        envvar="SCHEDD_TASK_DATABASE_URL",
        help="for transactional tasks of the local executor: the database as the task role; "
        "set it in the environment: as a flag it is refused",
    ),
    retain_runs: float = typer.Option(
        30, envvar="SCHEDD_RETAIN_RUNS_DAYS", min=0, help="days finished runs are kept; 0: forever"
    ),
    retain_logs: float = typer.Option(
        30, envvar="SCHEDD_RETAIN_LOGS_DAYS", min=0, help="days task output is kept; 0: forever"
    ),
    retain_audit: float = typer.Option(
        365, envvar="SCHEDD_RETAIN_AUDIT_DAYS", min=0, help="days audit records are kept; 0: forever"
    ),
    retain_records: float = typer.Option(
        7,
        envvar="SCHEDD_RETAIN_RECORDS_DAYS",
        min=0,
        help="days the pass log, delivered callbacks, request ids and departed workers are kept; 0: forever",
    ),
    max_map_length: int = typer.Option(
        DEFAULT_MAX_MAP_LENGTH,
        envvar="SCHEDD_MAX_MAP_LENGTH",
        min=1,
        max=100_000,
        help="most task instances one mapped task expands into; more fails the task",
    ),
    task_user: str = typer.Option(
        "", envvar="SCHEDD_TASK_USER", help="the local executor runs tasks as this user (root only)"
    ),
    asset_watchers: str = typer.Option(
        "",
        envvar="SCHEDD_ASSET_WATCHERS",
        help="JSON list of asset watchers (docs/scheduling.md); set it in the environment",
    ),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Run a scheduler replica: campaign for leadership and schedule while leading.

    Logs: ``SCHEDD_LOG_FORMAT`` (``text`` or ``json``); tracing: the standard ``OTEL_*`` variables.
    """
    setup_telemetry("schedd-scheduler", log_level)
    # The parameters of this function are exactly the fields of SchedulerOptions.
    config = scheduler_config(SchedulerOptions(**locals()))
    protect_secrets("schedd-scheduler", SECRET_VARIABLES, SECRET_FLAGS)
    try:
        # asyncio's loop, not uvloop's: a local executor spawns task processes, and uvloop spawns with fork(),
        # which runs gRPC's fork handlers in the child (shell tasks died of SIGSEGV under load).
        asyncio.run(serve(config))
    except Unavailable as exc:
        typer.echo(f"schedd-scheduler: {exc}", err=True)
        raise typer.Exit(2) from None


@dataclass(frozen=True)
class SchedulerOptions:
    """The options of ``schedd-scheduler`` as given (flags or environment), before they are checked."""

    database_url: str
    etcd_endpoints: str
    identity: str
    lease_ttl: int
    renew_deadline: float
    retry_period: float
    metrics_listen: str
    zombie_threshold: float
    executor: str
    parallelism: int
    task_database_url: str
    retain_runs: float
    retain_logs: float
    retain_audit: float
    retain_records: float
    max_map_length: int
    task_user: str
    asset_watchers: str
    log_level: str


def scheduler_config(options: SchedulerOptions) -> SchedulerConfig:
    """The replica's configuration from its options; typer.BadParameter for one that does not hold."""
    executor = options.executor
    try:
        ExecutorKind(executor)
    except ValueError:
        raise typer.BadParameter(
            f"--executor must be distributed, local or sequential, not {executor!r}"
        ) from None
    try:
        timing = LeaseTiming(
            ttl=options.lease_ttl, renew_deadline=options.renew_deadline, retry_period=options.retry_period
        )
        etcd_auth = read_etcd_auth(os.environ)
        task_environment = (
            TaskEnvironment.for_runner(os.environ, options.task_user) if executor != "distributed" else None
        )
        watchers = parse_watchers(options.asset_watchers)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    records = options.retain_records * DAY
    return SchedulerConfig(
        database_url=options.database_url,
        etcd_endpoints=options.etcd_endpoints,
        etcd_auth=etcd_auth,
        identity=options.identity or f"{socket.gethostname()}-{os.getpid()}",
        lease=timing,
        metrics_listen=options.metrics_listen,
        zombie_threshold=options.zombie_threshold,
        executor=executor,
        parallelism=options.parallelism,
        task_database_url=options.task_database_url,
        task_environment=task_environment,
        max_map_length=options.max_map_length,
        asset_watchers=watchers,
        retention=Retention(
            runs=options.retain_runs * DAY,
            logs=options.retain_logs * DAY,
            passes=records,
            outbox=records,
            requests=records,
            workers=records,
            audit=options.retain_audit * DAY,
        ),
    )


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
