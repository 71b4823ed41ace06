"""Pick TCP ports for local servers.

A port returned here was free at the moment it was probed; nothing reserves it
afterwards. Another process may take it before the server binds it, so callers
that start a server must detect a bind failure and retry with a new port (the
``LocalPostgres`` and ``LocalEtcd`` starters do).
"""

from __future__ import annotations

import socket

LOCALHOST = "127.0.0.1"


def free_port(host: str = LOCALHOST) -> int:
    """Return a TCP port on ``host`` that nothing listened on when probed.

    The kernel picks the port from its ephemeral range, so it is never a
    well-known port such as 5432. Not reserved: see the module docstring.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int, host: str = LOCALHOST) -> bool:
    """Tell whether ``port`` on ``host`` can be bound right now (same caveat as :func:`free_port`).

    The probe sets ``SO_REUSEADDR`` like the servers do, so a port whose last
    connections linger in TIME_WAIT counts as free, while one with a listener
    does not.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
