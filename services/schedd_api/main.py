"""Entry point of the api service: ``schedd-api``."""

from __future__ import annotations

import logging
import os

import grpc
import typer
import uvloop

from schedd.v1 import api_pb2, assets_pb2, secrets_pb2
from schedd_api.access import AuditServicer, TokenServicer
from schedd_api.assets import AssetServicer
from schedd_api.bundles import BundleServicer
from schedd_api.config import ApiConfig
from schedd_api.fleet_servicers import BackfillServicer, ClusterServicer, PoolServicer, WorkerServicer
from schedd_api.metrics import ApiMetrics, MetricsInterceptor
from schedd_api.secrets import SecretsServicer
from schedd_api.servicer import DagServicer, RunServicer
from schedd_api.watch import RunWatchers
from schedd_auth.secret_backends import backends_from_env
from schedd_auth.secret_box import SecretBox
from schedd_auth.tokens import parse
from schedd_coord.client import EtcdClient
from schedd_coord.credentials import read_etcd_auth
from schedd_coord.errors import CoordinationError, EtcdAuthFailed
from schedd_core.bundle_archive import ArchiveLimits
from schedd_core.clock import SystemClock
from schedd_core.errors import InvalidArgument
from schedd_exec.process_secrets import protect_secrets
from schedd_faults import FaultPoints
from schedd_rpc.access import AccessInterceptor
from schedd_rpc.call_turns import CallTurns
from schedd_rpc.frame import add_service
from schedd_rpc.refused_calls import window_from_env
from schedd_rpc.server import (
    auth_enabled,
    make_server,
    max_receive_bytes,
    set_serving,
    stop_signals,
    warn_auth_disabled,
)
from schedd_rpc.stream_limits import StreamCaps, StreamLimits
from schedd_rpc.tls import ServerTLS
from schedd_store import bootstrap_token, channels
from schedd_store.callers import StoredCallers
from schedd_store.database import Engine
from schedd_store.engine import DATABASE_ERRORS, make_engine
from schedd_store.notify import Listener
from schedd_store.secrets import SecretStore
from schedd_telemetry import tracing
from schedd_telemetry.grpc_spans import ServerSpanInterceptor
from schedd_telemetry.setup import setup_telemetry

log = logging.getLogger("schedd.api")

#: The services the api serves, by name (the asset and secrets services are defined in protos of
#: their own; TaskSecrets is the registry's).
SERVED = {
    **api_pb2.DESCRIPTOR.services_by_name,
    "AssetService": assets_pb2.DESCRIPTOR.services_by_name["AssetService"],
    "SecretsService": secrets_pb2.DESCRIPTOR.services_by_name["SecretsService"],
}
SERVICES = [service.full_name for service in SERVED.values()]


def secrets_servicer(engine: Engine) -> SecretsServicer:
    """Variables and connections, with the keys and backends this process's environment names."""
    return SecretsServicer(SecretStore(engine, SecretBox.from_env(os.environ), backends_from_env(os.environ)))


async def ensure_bootstrap_token(config: ApiConfig) -> None:
    """Store ``SCHEDD_BOOTSTRAP_TOKEN`` as the admin token ``bootstrap-admin``, revoking the one it
    replaces (``schedd_store.bootstrap_token``); InvalidArgument, and nothing changed, when it is not
    a token or may not become the bootstrap token (one replaced before, for example)."""
    token = parse(config.bootstrap_token)
    if token is None:
        raise InvalidArgument("SCHEDD_BOOTSTRAP_TOKEN", "is not a schedd token (sdt_<id>_<secret>)")
    engine = make_engine(config.database_url, pool_size=1, application_name="schedd-api")
    try:
        outcome = await bootstrap_token.ensure(engine, token)
    finally:
        await engine.dispose()
    if outcome.retired_token_id:
        log.warning(
            "SCHEDD_BOOTSTRAP_TOKEN changed: revoked the previous bootstrap token (now %r), stored the new",
            bootstrap_token.RETIRED_PREFIX + outcome.retired_token_id,
        )
    elif outcome.stored:
        log.info("stored the bootstrap admin token %r", bootstrap_token.NAME)


#: Calls whose time goes to etcd, not the database: they take no turn at the database connections
#: (``schedd_rpc.call_turns``), so calls waiting on an etcd out of reach hold no other caller back.
WAIT_ON_ETCD = frozenset({"/schedd.v1.ClusterService/GetLeader"})


async def check_etcd_credentials(etcd: EtcdClient) -> None:
    """Raise EtcdAuthFailed when etcd refuses the api's user; an unreachable etcd only warns (the
    leader status answers UNAVAILABLE until it is back)."""
    try:
        await etcd.ping()
    except EtcdAuthFailed:
        raise
    except CoordinationError as exc:
        log.warning("etcd: %s; the leader status is unavailable until it answers", exc)


async def serve(config: ApiConfig) -> None:
    etcd = EtcdClient(config.etcd_endpoints, auth=config.etcd_auth) if config.etcd_endpoints else None
    if etcd is not None:
        await check_etcd_credentials(etcd)
    engine = make_engine(config.database_url, pool_size=config.db_pool_size, application_name="schedd-api")
    clock = SystemClock()
    faults = FaultPoints.from_env(os.environ)
    metrics = ApiMetrics()
    watchers = RunWatchers(metrics.registry)
    listener = Listener(
        config.database_url,
        {channels.RUNS: watchers.notified, channels.RUNS_HANDED_OFF: watchers.notified},
        on_connect=watchers.reconnected,
    )
    servicers: dict[str, object] = {
        "DagService": DagServicer(
            engine,
            clock,
            paused_at_creation=config.dags_paused_at_creation,
            cron_data_intervals=config.create_cron_data_intervals,
        ),
        "RunService": RunServicer(engine, clock, faults, watchers),
        "BackfillService": BackfillServicer(engine, clock, faults),
        "ClusterService": ClusterServicer(engine, etcd),
        "WorkerService": WorkerServicer(engine),
        "PoolService": PoolServicer(engine),
        "TokenService": TokenServicer(engine),
        "AuditService": AuditServicer(engine),
        "BundleService": BundleServicer(engine, ArchiveLimits.from_env(os.environ)),
        "AssetService": AssetServicer(engine),
        "SecretsService": secrets_servicer(engine),
    }

    def register(server: grpc.aio.Server) -> None:
        for name, servicer in servicers.items():
            add_service(server, SERVED[name], servicer, backend=DATABASE_ERRORS)

    if config.bootstrap_token:
        await ensure_bootstrap_token(config)
    if not config.auth:
        warn_auth_disabled("api")
    access = AccessInterceptor(
        StoredCallers(engine),
        SERVED.values(),
        enabled=config.auth,
        refusal_window=window_from_env(os.environ),
        stream_limits=StreamLimits(StreamCaps.from_env(os.environ), registry=metrics.registry),
        call_turns=CallTurns(config.db_pool_size, exempt=WAIT_ON_ETCD, registry=metrics.registry),
    )
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
        max_receive_bytes=max_receive_bytes(),  # bundles are uploaded in pieces
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
    await access.close()
    await listener.stop()
    if etcd is not None:
        await etcd.close()
    await engine.dispose()


def cli(
    database_url: str = typer.Option(..., envvar="SCHEDD_DATABASE_URL", help="postgresql+asyncpg://..."),
    listen: str = typer.Option("127.0.0.1:50051", envvar="SCHEDD_API_LISTEN"),
    etcd_endpoints: str = typer.Option("", envvar="SCHEDD_ETCD_ENDPOINTS", help="for leader status"),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="[host:]port (loopback)"),
    dags_paused_at_creation: bool = typer.Option(
        True,
        "--dags-paused-at-creation/--dags-unpaused-at-creation",
        envvar="SCHEDD_DAGS_PAUSED_AT_CREATION",
        help="whether a DAG's first registration leaves it paused (RegisterDagRequest.unpause overrides)",
    ),
    create_cron_data_intervals: bool = typer.Option(
        True,
        "--create-cron-data-intervals/--create-cron-trigger-timetables",
        envvar="SCHEDD_CREATE_CRON_DATA_INTERVALS",
        help="what a plain cron schedule means in DAGs registered from now on: a data-interval "
        "timetable (Airflow 2) or a trigger timetable (Airflow 3's default); docs/scheduling.md",
    ),
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
            etcd_auth=read_etcd_auth(os.environ),
            auth=auth_enabled(),
            tls=ServerTLS.from_env(os.environ),
            bootstrap_token=os.environ.get("SCHEDD_BOOTSTRAP_TOKEN", ""),
            metrics_listen=metrics_listen,
            dags_paused_at_creation=dags_paused_at_creation,
            create_cron_data_intervals=create_cron_data_intervals,
        )
        protect_secrets(
            "schedd-api",
            ("SCHEDD_DATABASE_URL", "SCHEDD_BOOTSTRAP_TOKEN", "SCHEDD_ETCD_PASSWORD"),
            {"--database-url": "SCHEDD_DATABASE_URL"},
        )
        uvloop.run(serve(config))
    except (InvalidArgument, EtcdAuthFailed, ValueError) as exc:
        typer.echo(f"schedd-api: {exc}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
