"""Entry point of the scheduler service: ``schedd-scheduler``."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import typer

from schedd_coord.client import EtcdClient
from schedd_coord.lease import LeaseTiming
from schedd_core.errors import Unavailable
from schedd_rpc.server import stop_signals
from schedd_scheduler.config import SchedulerConfig
from schedd_scheduler.leadership import Replica, warm_up
from schedd_scheduler.metrics import SchedulerMetrics
from schedd_scheduler.pending import PendingRuns
from schedd_store import channels
from schedd_store.engine import make_engine
from schedd_store.notify import Listener

log = logging.getLogger("schedd.scheduler")


async def serve(config: SchedulerConfig) -> None:
    engine = make_engine(
        config.database_url, pool_size=config.db_pool_size, application_name="schedd-scheduler"
    )
    etcd = EtcdClient(config.etcd_endpoints)
    stop = stop_signals()
    try:
        await _check_dependencies(engine, etcd)
        pending = PendingRuns()
        listener = Listener(
            config.database_url,
            {channels.RUNS: pending.add_payload},
            on_connect=pending.request_full_scan_async,
        )
        await listener.start()
        metrics = SchedulerMetrics()
        if config.metrics_listen:
            metrics.serve(config.metrics_listen)
        replica = Replica(config, engine, etcd, pending, metrics)
        log.info("scheduler %s campaigning", config.identity)
        await replica.run(stop)
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
    database_url: str = typer.Option(..., envvar="SCHEDD_DATABASE_URL"),
    etcd_endpoints: str = typer.Option(..., envvar="SCHEDD_ETCD_ENDPOINTS", help="host:port[,host:port]"),
    identity: str = typer.Option("", envvar="SCHEDD_SCHEDULER_ID", help="default: hostname-pid"),
    lease_ttl: int = typer.Option(3, envvar="SCHEDD_LEASE_TTL", help="seconds"),
    renew_deadline: float = typer.Option(2.0, envvar="SCHEDD_RENEW_DEADLINE", help="seconds"),
    retry_period: float = typer.Option(0.5, envvar="SCHEDD_RETRY_PERIOD", help="seconds"),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="host:port for /metrics"),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Run a scheduler replica: campaign for leadership and schedule while leading."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        timing = LeaseTiming(ttl=lease_ttl, renew_deadline=renew_deadline, retry_period=retry_period)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    config = SchedulerConfig(
        database_url=database_url,
        etcd_endpoints=etcd_endpoints,
        identity=identity or f"{socket.gethostname()}-{os.getpid()}",
        lease=timing,
        metrics_listen=metrics_listen,
    )
    try:
        asyncio.run(serve(config))
    except Unavailable as exc:
        typer.echo(f"schedd-scheduler: {exc}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
