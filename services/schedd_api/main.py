"""Entry point of the api service: ``schedd-api``."""

from __future__ import annotations

import asyncio
import logging
import os

import grpc
import typer

from schedd.v1 import api_pb2
from schedd_api.access import AuditServicer, TokenServicer
from schedd_api.bundles import MAX_REQUEST_BYTES, BundleServicer
from schedd_api.config import ApiConfig
from schedd_api.fleet_servicers import BackfillServicer, ClusterServicer, PoolServicer, WorkerServicer
from schedd_api.metrics import ApiMetrics, MetricsInterceptor
from schedd_api.servicer import DagServicer, RunServicer
from schedd_api.watch import RunWatchers
from schedd_auth.tokens import parse
from schedd_coord.client import EtcdClient
from schedd_core.clock import SystemClock
from schedd_core.errors import AlreadyExists, InvalidArgument
from schedd_faults import FaultPoints
from schedd_rpc.access import AccessInterceptor
from schedd_rpc.frame import add_service
from schedd_rpc.server import auth_enabled, make_server, set_serving, stop_signals, warn_auth_disabled
from schedd_rpc.tls import ServerTLS
from schedd_store import channels, tokens
from schedd_store.engine import make_engine
from schedd_store.notify import Listener
from schedd_telemetry import tracing
from schedd_telemetry.grpc_spans import ServerSpanInterceptor
from schedd_telemetry.setup import setup_telemetry

log = logging.getLogger("schedd.api")

SERVICES = [service.full_name for service in api_pb2.DESCRIPTOR.services_by_name.values()]

#: The name under which ``SCHEDD_BOOTSTRAP_TOKEN`` is stored (an admin token).
BOOTSTRAP_TOKEN_NAME = "bootstrap-admin"


async def ensure_bootstrap_token(config: ApiConfig) -> None:
    """Store ``SCHEDD_BOOTSTRAP_TOKEN`` as an admin token if it is not stored yet (a token of that
    name that was revoked stays revoked)."""
    token = parse(config.bootstrap_token)
    if token is None:
        raise InvalidArgument("SCHEDD_BOOTSTRAP_TOKEN", "is not a schedd token (sdt_<id>_<secret>)")
    engine = make_engine(config.database_url, pool_size=1, application_name="schedd-api")
    try:
        await tokens.create_token(engine, BOOTSTRAP_TOKEN_NAME, "admin", token=token, created_by="bootstrap")
        log.info("stored the bootstrap admin token %r", BOOTSTRAP_TOKEN_NAME)
    except AlreadyExists:
        pass
    finally:
        await engine.dispose()


async def serve(config: ApiConfig) -> None:
    engine = make_engine(config.database_url, pool_size=config.db_pool_size, application_name="schedd-api")
    etcd = EtcdClient(config.etcd_endpoints) if config.etcd_endpoints else None
    clock = SystemClock()
    faults = FaultPoints.from_env(os.environ)
    watchers = RunWatchers()
    listener = Listener(
        config.database_url, {channels.RUNS: watchers.notified}, on_connect=watchers.reconnected
    )
    servicers = {
        "DagService": DagServicer(engine, clock),
        "RunService": RunServicer(engine, clock, faults, watchers),
        "BackfillService": BackfillServicer(engine, clock, faults),
        "ClusterService": ClusterServicer(engine, etcd),
        "WorkerService": WorkerServicer(engine),
        "PoolService": PoolServicer(engine),
        "TokenService": TokenServicer(engine),
        "AuditService": AuditServicer(engine),
        "BundleService": BundleServicer(engine),
    }

    def register(server: grpc.aio.Server) -> None:
        for name, servicer in servicers.items():
            add_service(server, api_pb2.DESCRIPTOR.services_by_name[name], servicer)

    if config.bootstrap_token:
        await ensure_bootstrap_token(config)
    if not config.auth:
        warn_auth_disabled("api")
    access = AccessInterceptor(engine, api_pb2.DESCRIPTOR.services_by_name.values(), enabled=config.auth)
    metrics = ApiMetrics()
    # Outermost first: refused calls are counted and traced too.
    interceptors: list[grpc.aio.ServerInterceptor] = [MetricsInterceptor(metrics)]
    if tracing.enabled():
        interceptors.append(ServerSpanInterceptor("schedd.api"))
    interceptors.append(access)
    server, health = make_server(
        config.listen,
        SERVICES,
        register,
        tls=config.tls,
        interceptors=interceptors,
        max_message_bytes=MAX_REQUEST_BYTES,  # a code bundle at its limit
    )
    if config.metrics_listen:
        metrics.serve(config.metrics_listen)
    stop = stop_signals()
    await listener.start(wait=False)  # the api serves (UNAVAILABLE) while the database is down
    await server.start()
    await set_serving(health, SERVICES, True)
    log.info("api listening on %s (%s)", config.listen, "TLS" if config.tls else "plaintext")
    await stop.wait()
    await set_serving(health, SERVICES, False)
    await server.stop(grace=5)
    await listener.stop()
    if etcd is not None:
        await etcd.close()
    await engine.dispose()


def cli(
    database_url: str = typer.Option(..., envvar="SCHEDD_DATABASE_URL", help="postgresql+asyncpg://..."),
    listen: str = typer.Option("127.0.0.1:50051", envvar="SCHEDD_API_LISTEN"),
    etcd_endpoints: str = typer.Option("", envvar="SCHEDD_ETCD_ENDPOINTS", help="for leader status"),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="host:port for /metrics"),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Serve the schedd public API.

    TLS: ``SCHEDD_TLS_CERT_FILE``, ``SCHEDD_TLS_KEY_FILE`` and, for mutual TLS,
    ``SCHEDD_TLS_CLIENT_CA_FILE``. Authentication: ``SCHEDD_AUTH`` (``tokens``, the default, or
    ``none``); ``SCHEDD_BOOTSTRAP_TOKEN`` stores a first admin token. Logs: ``SCHEDD_LOG_FORMAT``
    (``text`` or ``json``); tracing: the standard ``OTEL_*`` variables (docs/observability.md).
    """
    setup_telemetry("schedd-api", log_level)
    try:
        config = ApiConfig(
            database_url=database_url,
            listen=listen,
            etcd_endpoints=etcd_endpoints,
            auth=auth_enabled(),
            tls=ServerTLS.from_env(os.environ),
            bootstrap_token=os.environ.get("SCHEDD_BOOTSTRAP_TOKEN", ""),
            metrics_listen=metrics_listen,
        )
        asyncio.run(serve(config))
    except InvalidArgument as exc:
        typer.echo(f"schedd-api: {exc}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
