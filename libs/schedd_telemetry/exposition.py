"""Serving a service's Prometheus metrics on ``/metrics`` (``--metrics-listen`` /
``SCHEDD_METRICS_LISTEN``).

An address without a host (``9100`` or ``:9100``) means the loopback interface, ``127.0.0.1``:
metrics name DAGs, queues and workers, so they are served beyond the host only when an address says
so (``0.0.0.0:9100``, ``[::]:9100`` or one interface's own address). Not guaranteed: who can reach
an address that was given; that is the network policies' part (docs/observability.md).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server

#: The interface an address without a host is served on.
DEFAULT_HOST = "127.0.0.1"


def bind_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``host:port``, ``:port`` or ``port`` (the last two on :data:`DEFAULT_HOST`);
    ValueError naming the address when its port is not a number from 0 to 65535."""
    host, _, port = address.strip().rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"metrics address {address!r}: the port must be a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"metrics address {address!r}: the port must be from 0 to 65535")
    return host.strip("[]") or DEFAULT_HOST, number


def serve(registry: CollectorRegistry, address: str) -> None:
    """Serve ``registry`` over HTTP on ``address`` (see :func:`bind_address`) from a background
    thread; OSError when the address cannot be bound."""
    host, port = bind_address(address)
    start_http_server(port, addr=host, registry=registry)
