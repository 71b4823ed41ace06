"""Configuration of the registry service, read once in ``main``."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedd_core.permits import AttemptWindows
from schedd_rpc.tls import ServerTLS


@dataclass(frozen=True)
class RegistryConfig:
    database_url: str
    identity: str
    listen: str = "127.0.0.1:50052"
    db_pool_size: int = 6
    #: The timing granted to every worker (heartbeat interval, ack window, silence limit): how long a
    #: worker may keep running attempts unheard; see ``schedd_core.permits``.
    windows: AttemptWindows = field(default_factory=AttemptWindows)
    #: Seconds a worker asked to drain (``schedctl workers drain``) may take to finish its tasks.
    drain_grace: float = 300.0
    #: host:port to serve Prometheus metrics on (queue depths for autoscalers); empty for none.
    metrics_listen: str = ""
    #: Most assignments claimed for one worker in one statement.
    claim_batch: int = 256
    #: Require a worker token on every stream (``SCHEDD_AUTH=tokens``); False only for development.
    auth: bool = True
    tls: ServerTLS | None = None
