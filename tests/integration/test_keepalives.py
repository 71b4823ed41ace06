"""Lease keep-alives over etcd's JSON gateway (``schedd_coord.keepalives``), against a real etcd
with authentication on: a kept lease is renewed, one that is gone is reported as gone (and its
holder stops at once), and an endpoint that does not answer fails within the timeout."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

import pytest

from schedd_coord.client import EtcdClient, EtcdTLS
from schedd_coord.keepalives import HttpKeepAlive, KeepAliveFailed, KeepAlives
from schedd_coord.lease import KeptLease, LeaseTiming
from tests.fixtures.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

FAST = LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.3)


async def test_a_keep_alive_renews_a_lease_and_reports_one_that_is_gone(etcd_endpoints: str) -> None:
    client = EtcdClient(etcd_endpoints)
    keeper = KeepAlives(etcd_endpoints)
    try:
        lease_id = await client.grant(7)
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) == 7
        await client.revoke(lease_id)
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) <= 0
        assert not keeper.over_grpc, "a member whose gateway answers is kept alive over HTTP"
    finally:
        keeper.close()
        await client.close()


async def test_a_connection_closed_by_etcd_is_replaced_and_the_keep_alives_stay_on_http(
    etcd_endpoints: str,
) -> None:
    """A kept connection that etcd closed (a restart) fails at its next request: that one is sent
    again on a new connection, not taken for a gateway that cannot answer."""
    proxy = TcpProxy(etcd_endpoints).start()
    client = EtcdClient(etcd_endpoints)
    keeper = KeepAlives(proxy.endpoint)
    try:
        lease_id = await client.grant(7)
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) == 7
        proxy.drop_connections()
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) == 7
        assert not keeper.over_grpc
        await client.revoke(lease_id)
    finally:
        keeper.close()
        await client.close()
        proxy.stop()


def test_an_endpoint_that_does_not_answer_fails_within_the_timeout() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts the connection, never answers
    keeper = KeepAlives(f"127.0.0.1:{silent.getsockname()[1]}")
    started = time.monotonic()
    try:
        with pytest.raises(KeepAliveFailed, match="keep-alive to etcd failed"):
            keeper.keep_alive(1, 0.3)
        assert time.monotonic() - started < 2.0
    finally:
        keeper.close()
        silent.close()


async def test_a_lease_revoked_elsewhere_is_lost_at_its_next_keep_alive(etcd_endpoints: str) -> None:
    """etcd answers the keep-alive of a revoked lease without a TTL: the holder stops then, not at
    the end of its renew deadline."""
    lease = KeptLease(etcd_endpoints, FAST)
    other = EtcdClient(etcd_endpoints)
    try:
        await lease.start()
        await other.revoke(lease.lease_id)
        revoked_at = time.monotonic()
        await asyncio.wait_for(lease.lost.wait(), FAST.renew_deadline)
        assert not lease.valid
        assert time.monotonic() - revoked_at < FAST.retry_period + 0.5
    finally:
        await lease.stop(revoke=False)
        await other.close()


async def test_stopping_with_revoke_removes_the_lease_from_etcd(etcd_endpoints: str) -> None:
    lease = KeptLease(etcd_endpoints, FAST)
    keeper = KeepAlives(etcd_endpoints)
    try:
        lease_id = await lease.start()
        await lease.stop(revoke=True)
        assert lease.lost.is_set() and not lease.valid
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) <= 0
    finally:
        keeper.close()


def test_an_ipv6_endpoint_is_reached_at_its_address() -> None:
    """``[::1]:2379`` is an address and a port, as gRPC reads it; the brackets are not the host."""
    listener = socket.socket(socket.AF_INET6)
    listener.bind(("::1", 0))
    listener.listen()
    keeper = KeepAlives(f"[::1]:{listener.getsockname()[1]}")
    try:
        with pytest.raises(KeepAliveFailed, match="timed out"):
            keeper.keep_alive(1, 0.3)  # reached (accepted), never answered
        listener.settimeout(2)
        accepted, _ = listener.accept()
        accepted.close()
    finally:
        keeper.close()
        listener.close()


class ScriptedGateway:
    """A listener that answers each request it reads with the next of ``answers`` (raw bytes), on
    whichever connection the request came; counts the connections it accepted."""

    def __init__(self, answers: list[bytes]) -> None:
        self._answers = answers
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._listener.settimeout(10)
        with contextlib.suppress(OSError):
            while self._answers:
                conn, _ = self._listener.accept()
                self.connections += 1
                with conn:
                    conn.settimeout(10)
                    while self._answers and conn.recv(65536):
                        conn.sendall(self._answers.pop(0))

    def close(self) -> None:
        self._listener.close()
        self._thread.join(timeout=10)


def _chunked(body: bytes, *headers: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def test_the_connection_is_kept_until_an_answer_closes_it() -> None:
    """The gateway's answers (chunked, as etcd sends them) leave the connection open for the next
    keep-alive, except one that says ``Connection: close``."""
    ttl = b'{"result":{"ID":"7","TTL":"5"}}'
    gateway = ScriptedGateway([_chunked(ttl), _chunked(ttl, b"Connection: close"), _chunked(ttl)])
    keeper = HttpKeepAlive(gateway.endpoint, EtcdTLS())
    try:
        assert [keeper.keep_alive(7, 2.0) for _ in range(3)] == [5, 5, 5]
        assert gateway.connections == 2
    finally:
        keeper.close()
        gateway.close()


@pytest.mark.parametrize(
    "answer",
    [b"SSH-2.0-OpenSSH_9.2\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nnot{}"],
    ids=["not-http", "not-etcds-json"],
)
def test_an_answer_that_is_not_etcds_fails_the_keep_alive(answer: bytes) -> None:
    gateway = ScriptedGateway([answer])
    keeper = HttpKeepAlive(gateway.endpoint, EtcdTLS())
    try:
        with pytest.raises(KeepAliveFailed):
            keeper.keep_alive(7, 2.0)
    finally:
        keeper.close()
        gateway.close()
