"""Entry point of the registry service: ``schedd-registry``."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Sequence

import grpc
import typer
import uvloop

from schedd.v1 import secrets_pb2, worker_pb2
from schedd_auth.secret_backends import backends_from_env
from schedd_auth.secret_box import SecretBox
from schedd_core.errors import InvalidArgument
from schedd_core.permits import AttemptWindows
from schedd_exec.assignments import AssignmentBuilder
from schedd_exec.process_secrets import protect_secrets
from schedd_faults import FaultPoints
from schedd_registry.callbacks import CallbackRelay
from schedd_registry.config import RegistryConfig
from schedd_registry.control_hints import ControlHints
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.metrics import RegistryMetrics
from schedd_registry.servicer import WorkerRegistryServicer
from schedd_registry.task_secrets import TaskSecretsServicer
from schedd_registry.task_spans import TaskSpans
from schedd_rpc.access import AccessInterceptor
from schedd_rpc.frame import add_service
from schedd_rpc.server import (
    auth_enabled,
    make_server,
    max_receive_bytes,
    set_serving,
    stop_signals,
    warn_auth_disabled,
)
from schedd_rpc.tls import ServerTLS
from schedd_store import channels
from schedd_store.callers import StoredCallers
from schedd_store.claims import AssignmentClaims
from schedd_store.database import Engine
from schedd_store.engine import DATABASE_ERRORS, GENERIC_PLANS, make_engine
from schedd_store.notify import Listener
from schedd_store.secrets import SecretStore
from schedd_telemetry.setup import setup_telemetry

log = logging.getLogger("schedd.registry")

#: The services the registry serves, by name.
SERVED = {
    "WorkerRegistry": worker_pb2.DESCRIPTOR.services_by_name["WorkerRegistry"],
    "TaskSecrets": secrets_pb2.DESCRIPTOR.services_by_name["TaskSecrets"],
}
SERVICES = [service.full_name for service in SERVED.values()]


def _engines(config: RegistryConfig) -> tuple[Engine, Engine]:
    """The registry's engine, and the one its hot transactions (results applied, task instances
    claimed) run through: connections of their own that keep one generic plan per statement, as
    every statement of those transactions finds its rows by key
    (``schedd_store.engine.GENERIC_PLANS``)."""
    engine = make_engine(
        config.database_url, pool_size=config.db_pool_size, application_name="schedd-registry"
    )
    keyed = make_engine(
        config.database_url, pool_size=2, application_name="schedd-registry", server_settings=GENERIC_PLANS
    )
    return engine, keyed


async def serve(config: RegistryConfig) -> None:
    engine, keyed = _engines(config)
    metrics = RegistryMetrics()
    spans = TaskSpans(config.identity)

    def claimed(assignments: Sequence[worker_pb2.Assignment]) -> None:
        metrics.claimed(assignments)
        spans.claimed(assignments)

    dispatcher = Dispatcher(
        engine,
        AssignmentBuilder(AssignmentClaims(keyed)),
        claim_batch=config.claim_batch,
        on_assigned=claimed,
        windows=config.windows,
        faults=FaultPoints.from_env(os.environ),
    )
    servicer = WorkerRegistryServicer(engine, dispatcher, config, results_engine=keyed)
    secrets = SecretStore(engine, SecretBox.from_env(os.environ), backends_from_env(os.environ))
    relay = CallbackRelay(engine, dispatcher, secrets=secrets)
    servicer.on_callback_done = relay.callback_done
    servicer.reports.on_applied = metrics.applied
    dispatcher.on_handed_off = metrics.handed_off.inc
    hints = ControlHints(engine, dispatcher, drain_grace=config.drain_grace)
    listener = Listener(
        config.database_url,
        {
            channels.QUEUED: dispatcher.wake,
            channels.WORKERS: hints.drain_requested,
            channels.CANCEL: hints.cancel_requested,
            channels.OUTBOX: relay.wake,
        },
        on_connect=dispatcher.wake_async,
    )

    servicers = {"WorkerRegistry": servicer, "TaskSecrets": TaskSecretsServicer(secrets)}

    def register(server: grpc.aio.Server) -> None:
        for name, served in servicers.items():
            add_service(server, SERVED[name], served, backend=DATABASE_ERRORS)

    if not config.auth:
        warn_auth_disabled("registry")
    access = AccessInterceptor(StoredCallers(engine), SERVED.values(), enabled=config.auth)
    server, health = make_server(
        config.listen,
        SERVICES,
        register,
        tls=config.tls,
        interceptors=[access],
        max_receive_bytes=max_receive_bytes(),
    )
    stop = stop_signals()
    await listener.start()
    background = [
        asyncio.create_task(dispatcher.run(), name="dispatcher"),
        asyncio.create_task(servicer.results.run(), name="results"),
        asyncio.create_task(servicer.logs.run(), name="logs"),
        asyncio.create_task(relay.run(), name="callbacks"),
        asyncio.create_task(hints.run(), name="control-hints"),
    ]
    if config.metrics_listen:
        metrics.serve(config.metrics_listen)
        metrics.read_at_scrape(engine, dispatcher, asyncio.get_running_loop())
    await server.start()
    await set_serving(health, SERVICES, True)
    log.info("registry %s listening on %s", config.identity, config.listen)
    await stop.wait()
    await set_serving(health, SERVICES, False)
    await server.stop(grace=5)
    await access.close()  # the counts of refused calls still held
    for task in background:
        task.cancel()
    await listener.stop()
    await keyed.dispose()
    await engine.dispose()


def cli(
    database_url: str = typer.Option(..., envvar="SCHEDD_DATABASE_URL"),
    listen: str = typer.Option("127.0.0.1:50052", envvar="SCHEDD_REGISTRY_LISTEN"),
    identity: str = typer.Option("", envvar="SCHEDD_REGISTRY_ID", help="default: hostname-pid"),
    heartbeat_interval: float = typer.Option(
        1.0, envvar="SCHEDD_HEARTBEAT_INTERVAL", help="seconds between a worker's heartbeats"
    ),
    ack_window: float | None = typer.Option(
        None,
        envvar="SCHEDD_ACK_WINDOW",
        help="seconds a worker keeps running its attempts after its last acknowledged heartbeat, "
        "without a liveness lease (default: 3 heartbeat intervals)",
    ),
    silence_limit: float = typer.Option(
        30.0,
        envvar="SCHEDD_ZOMBIE_THRESHOLD",
        help="seconds unheard after which a worker's attempts are lost, lease or not",
    ),
    idle_heartbeat_interval: float = typer.Option(
        0.0,
        envvar="SCHEDD_IDLE_HEARTBEAT_INTERVAL",
        help="seconds between the heartbeats of a worker that holds no attempt "
        "(default: 10, or a third of the silence limit if shorter)",
    ),
    drain_grace: float = typer.Option(
        300.0, envvar="SCHEDD_DRAIN_GRACE", help="seconds a drained worker gets"
    ),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="[host:]port (loopback)"),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Serve the worker registry. TLS and authentication as for the api (``SCHEDD_TLS_*``,
    ``SCHEDD_AUTH``): workers connect with tokens of role worker. Logs: ``SCHEDD_LOG_FORMAT``
    (``text`` or ``json``); tracing: the standard ``OTEL_*`` variables."""
    setup_telemetry("schedd-registry", log_level)
    try:
        windows = AttemptWindows(
            heartbeat_interval=heartbeat_interval,
            ack_window=3 * heartbeat_interval if ack_window is None else ack_window,
            silence_limit=silence_limit,
            idle_heartbeat_interval=idle_heartbeat_interval,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        config = RegistryConfig(
            database_url=database_url,
            listen=listen,
            identity=identity or f"{socket.gethostname()}-{os.getpid()}",
            windows=windows,
            drain_grace=drain_grace,
            metrics_listen=metrics_listen,
            auth=auth_enabled(),
            tls=ServerTLS.from_env(os.environ),
        )
        protect_secrets(
            "schedd-registry",
            ("SCHEDD_DATABASE_URL", "SCHEDD_ETCD_PASSWORD"),
            {"--database-url": "SCHEDD_DATABASE_URL"},
        )
        uvloop.run(serve(config))
    except InvalidArgument as exc:
        typer.echo(f"schedd-registry: {exc}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
