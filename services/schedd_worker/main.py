"""Entry point of a worker: ``schedd-worker``."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import typer

from schedd_rpc.server import stop_signals
from schedd_worker.config import WorkerConfig
from schedd_worker.connection import WorkerConnection

log = logging.getLogger("schedd.worker")


async def serve(config: WorkerConfig) -> None:
    stop = stop_signals()
    await WorkerConnection(config).run(stop)


def cli(
    registry: str = typer.Option("127.0.0.1:50052", envvar="SCHEDD_REGISTRY", help="host:port"),
    worker_id: str = typer.Option("", envvar="SCHEDD_WORKER_ID", help="default: hostname-pid"),
    queues: str = typer.Option("default", envvar="SCHEDD_WORKER_QUEUES", help="comma-separated"),
    capacity: int = typer.Option(4, envvar="SCHEDD_WORKER_CAPACITY", min=1),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Run a worker: connect to a registry and run the tasks it assigns."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    hostname = socket.gethostname()
    config = WorkerConfig(
        registry=registry,
        worker_id=worker_id or f"{hostname}-{os.getpid()}",
        hostname=hostname,
        queues=tuple(q.strip() for q in queues.split(",") if q.strip()),
        capacity=capacity,
    )
    asyncio.run(serve(config))


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
