"""Configuration of the api service, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass

from schedd_coord.credentials import EtcdAuth
from schedd_rpc.tls import ServerTLS


@dataclass(frozen=True)
class ApiConfig:
    database_url: str
    listen: str = "127.0.0.1:50051"
    etcd_endpoints: str = ""
    #: the etcd user (``SCHEDD_ETCD_USER``); None: no authentication
    etcd_auth: EtcdAuth | None = None
    db_pool_size: int = 5
    #: Require a bearer token on every call (``SCHEDD_AUTH=tokens``); False only for development.
    auth: bool = True
    tls: ServerTLS | None = None
    #: ``SCHEDD_BOOTSTRAP_TOKEN``: stored as an admin token at start-up if it is not yet.
    bootstrap_token: str = ""
    #: host:port to serve Prometheus metrics on (``/metrics``); empty for none.
    metrics_listen: str = ""
    #: A DAG's first registration leaves it paused (``SCHEDD_DAGS_PAUSED_AT_CREATION``), as Airflow's
    #: ``dags_are_paused_at_creation``; a registration with ``unpause`` creates it unpaused.
    dags_paused_at_creation: bool = True
    #: A plain cron schedule of a DAG registered here means a data-interval timetable (Airflow 2;
    #: ``SCHEDD_CREATE_CRON_DATA_INTERVALS``, default true) or, when false, a trigger timetable
    #: (Airflow 3's default); fixed in the stored spec at registration.
    create_cron_data_intervals: bool = True
