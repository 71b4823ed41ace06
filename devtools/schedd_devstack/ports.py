"""Pick TCP ports for local servers.

A port returned here was free at the moment it was probed; nothing reserves it
afterwards. Two things keep the window between the probe and the server's bind
small in practice, and one thing handles what is left:

* ports are picked *below* the kernel's ephemeral range (``ip_local_port_range``),
  from :data:`PICK_RANGE`: the kernel hands ports of the ephemeral range to every
  outgoing connection, so under load a port probed there is often taken by a
  connection before the server binds it; below that range only a process that names
  the port itself can take it;
* this process never hands out the same port twice within :data:`_RECENT` picks, so
  two servers started together (a service's gRPC and metrics ports) do not get one port;
* callers that start a server still detect a bind failure and retry with a new port
  (the ``LocalPostgres`` and ``LocalEtcd`` starters and ``Cluster`` do).

Not guaranteed: that another process does not pick the same port (they probe too, so
only one of two can bind it; the loser retries).
"""

from __future__ import annotations

import collections
import random
import socket
import threading
from pathlib import Path

LOCALHOST = "127.0.0.1"
#: Where ports are picked when it lies below the ephemeral range: above the registered ports
#: that local servers commonly use (PostgreSQL's 5432, etcd's 2379, 8080...).
PICK_RANGE = (20000, 32768)
_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_PICK_TRIES = 200
_RECENT = 512

_lock = threading.Lock()
_recent: collections.deque[int] = collections.deque(maxlen=_RECENT)
_random = random.SystemRandom()


def free_port(host: str = LOCALHOST) -> int:
    """Return a TCP port on ``host`` that nothing listened on when probed.

    Picked at random from :data:`PICK_RANGE` below the ephemeral range (never a well-known
    port such as 5432), or from the kernel's ephemeral range when that range starts too low
    to leave room. Not reserved: see the module docstring.
    """
    low, high = _pick_range()
    with _lock:
        for _ in range(_PICK_TRIES if low < high else 0):
            port = _random.randrange(low, high)
            if port not in _recent and _bindable(port, host, reuse=False):
                _recent.append(port)
                return port
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _recent:
                _recent.append(port)
                return port


def port_is_free(port: int, host: str = LOCALHOST) -> bool:
    """Tell whether ``port`` on ``host`` can be bound right now (same caveat as :func:`free_port`).

    The probe sets ``SO_REUSEADDR`` like the servers do, so a port whose last
    connections linger in TIME_WAIT counts as free, while one with a listener
    does not.
    """
    return _bindable(port, host, reuse=True)


def _bindable(port: int, host: str, *, reuse: bool) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _pick_range() -> tuple[int, int]:
    """:data:`PICK_RANGE` cut at the start of the ephemeral range (empty when it starts below it)."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = PICK_RANGE[1]
    return PICK_RANGE[0], min(PICK_RANGE[1], ephemeral_low)
