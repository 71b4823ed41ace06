"""schedd_telemetry.exposition.serve: /metrics on the loopback interface for a bare port, and a
server thread that sleeps until a scrape comes (an idle service wakes for nothing)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from schedd_telemetry import exposition

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")

#: How long the thread is watched for wake-ups; prometheus_client's own server wakes every 0.5 s.
WATCHED = 1.6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _new_metrics_thread(before: set[threading.Thread]) -> threading.Thread:
    """The metrics thread started since ``before`` (other tests of this process serve metrics too)."""
    threads = [t for t in threading.enumerate() if t.name == "metrics" and t not in before]
    assert len(threads) == 1
    return threads[0]


def _listening_on(port: int) -> set[str]:
    """The IPv4 addresses listening on ``port`` (hex, from ``/proc/net/tcp``)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(address)
    return found


def _switches(thread: threading.Thread) -> int:
    """Times the thread was put on a CPU (``/proc``'s per-thread scheduler statistics)."""
    stat = Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text().split()
    return int(stat[2])


def test_a_bare_port_serves_metrics_on_loopback_and_the_thread_sleeps_between_scrapes() -> None:
    registry = CollectorRegistry()
    Counter("exposition_probe", "A counter to find in the scrape.", registry=registry).inc(3)
    port = _free_port()
    existing = set(threading.enumerate())
    exposition.serve(registry, str(port))
    thread = _new_metrics_thread(existing)

    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "exposition_probe_total 3.0" in body
    assert _listening_on(port) == {"0100007F"}  # 127.0.0.1 as /proc/net/tcp writes it

    before, settle_until = _switches(thread), time.monotonic() + 10
    while time.monotonic() < settle_until:  # the scrape's own bookkeeping done
        time.sleep(0.2)
        if _switches(thread) == before:
            break
        before = _switches(thread)
    deadline = time.monotonic() + WATCHED
    while time.monotonic() < deadline:
        time.sleep(0.1)
    assert _switches(thread) == before, "the metrics thread woke although nobody scraped"
