"""Entry point of the api service: ``schedd-api``."""

from __future__ import annotations

import asyncio
import logging
import os

import grpc
import typer

from schedd.v1 import api_pb2
from schedd_api.config import ApiConfig
from schedd_api.servicer import (
    BackfillServicer,
    ClusterServicer,
    DagServicer,
    PoolServicer,
    RunServicer,
    WorkerServicer,
)
from schedd_coord.client import EtcdClient
from schedd_core.clock import SystemClock
from schedd_faults import FaultPoints
from schedd_rpc.frame import add_service
from schedd_rpc.server import make_server, set_serving, stop_signals
from schedd_store.engine import make_engine

log = logging.getLogger("schedd.api")

SERVICES = [
    api_pb2.DESCRIPTOR.services_by_name["DagService"].full_name,
    api_pb2.DESCRIPTOR.services_by_name["RunService"].full_name,
    api_pb2.DESCRIPTOR.services_by_name["ClusterService"].full_name,
    api_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
    api_pb2.DESCRIPTOR.services_by_name["PoolService"].full_name,
    api_pb2.DESCRIPTOR.services_by_name["BackfillService"].full_name,
]


async def serve(config: ApiConfig) -> None:
    engine = make_engine(config.database_url, pool_size=config.db_pool_size, application_name="schedd-api")
    etcd = EtcdClient(config.etcd_endpoints) if config.etcd_endpoints else None
    clock = SystemClock()
    faults = FaultPoints.from_env(os.environ)
    servicers = {
        "DagService": DagServicer(engine, clock),
        "RunService": RunServicer(engine, clock, faults),
        "BackfillService": BackfillServicer(engine, clock, faults),
        "ClusterService": ClusterServicer(engine, etcd),
        "WorkerService": WorkerServicer(engine),
        "PoolService": PoolServicer(engine),
    }

    def register(server: grpc.aio.Server) -> None:
        for name, servicer in servicers.items():
            add_service(server, api_pb2.DESCRIPTOR.services_by_name[name], servicer)

    server, health = make_server(config.listen, SERVICES, register)
    stop = stop_signals()
    await server.start()
    await set_serving(health, SERVICES, True)
    log.info("api listening on %s", config.listen)
    await stop.wait()
    await set_serving(health, SERVICES, False)
    await server.stop(grace=5)
    if etcd is not None:
        await etcd.close()
    await engine.dispose()


def cli(
    database_url: str = typer.Option(..., envvar="SCHEDD_DATABASE_URL", help="postgresql+asyncpg://..."),
    listen: str = typer.Option("127.0.0.1:50051", envvar="SCHEDD_API_LISTEN"),
    etcd_endpoints: str = typer.Option("", envvar="SCHEDD_ETCD_ENDPOINTS", help="for leader status"),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Serve the schedd public API."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(ApiConfig(database_url=database_url, listen=listen, etcd_endpoints=etcd_endpoints)))


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
