"""Serving a service's Prometheus metrics on ``/metrics`` (``--metrics-listen`` /
``SCHEDD_METRICS_LISTEN``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server


def serve(registry: CollectorRegistry, address: str) -> None:
    """Serve ``registry`` over HTTP on ``host:port`` (``:port`` for every interface) from a
    background thread; OSError when the address cannot be bound."""
    host, _, port = address.rpartition(":")
    start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0", registry=registry)
