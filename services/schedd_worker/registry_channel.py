"""The worker's gRPC channel to a registry: its message size limit, its HTTP/2 pings, TLS.

Pings go every :data:`REGISTRY_PING_INTERVAL_MS`, also between calls, and each waits
:data:`REGISTRY_PING_TIMEOUT_MS` for its answer: a frozen or cut-off registry is given up within
15 s, half the default silence limit, and the worker reconnects (to the next registry). A registry
that died (its connections reset) is noticed at once. Pings every 2 s cost an idle stack about
0.2 % of a core (worker and registry both wake for each, docs/performance.md). The registry's server
accepts pings down to 1 s apart (``schedd_rpc.server.MIN_CLIENT_PING_INTERVAL_MS``).
"""

from __future__ import annotations

import grpc

from schedd_core.limits import WORKER_MAX_RECEIVE_BYTES
from schedd_rpc.tls import ClientTLS

REGISTRY_PING_INTERVAL_MS = 10_000
REGISTRY_PING_TIMEOUT_MS = 5_000
REGISTRY_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", WORKER_MAX_RECEIVE_BYTES),
    ("grpc.keepalive_time_ms", REGISTRY_PING_INTERVAL_MS),
    ("grpc.keepalive_timeout_ms", REGISTRY_PING_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.lb_policy_name", "round_robin"),
]


def registry_channel(registry: str, tls: ClientTLS | None) -> grpc.aio.Channel:
    """A channel to ``registry`` (``host:port``, or a list gRPC balances over), over TLS when given."""
    if tls is None:
        return grpc.aio.insecure_channel(registry, options=REGISTRY_CHANNEL_OPTIONS)
    return grpc.aio.secure_channel(registry, tls.credentials(), options=REGISTRY_CHANNEL_OPTIONS)
