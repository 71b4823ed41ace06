"""Serving a service's Prometheus metrics on ``/metrics`` (``--metrics-listen`` /
``SCHEDD_METRICS_LISTEN``).

An address without a host (``9100`` or ``:9100``) means the loopback interface, ``127.0.0.1``:
metrics name DAGs, queues and workers, so they are served beyond the host only when an address says
so (``0.0.0.0:9100``, ``[::]:9100`` or one interface's own address). Not guaranteed: who can reach
an address that was given; that is the network policies' part (docs/observability.md).

The server's thread sleeps until a scrape arrives: ``prometheus_client.start_http_server`` wakes its
thread twice a second to look for a shutdown that these services never ask for.
"""

from __future__ import annotations

import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

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
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family

    httpd = make_server(host, port, make_wsgi_app(registry), Server, handler_class=_QuietHandler)
    # no poll interval: the thread wakes for requests only (never shut down; it dies with the process)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": None}, name="metrics", daemon=True
    ).start()


class _QuietHandler(WSGIRequestHandler):
    """Scrapes are not logged (one line per scrape on stderr otherwise)."""

    def log_message(self, format: str, *args: object) -> None:
        pass
