"""Lease keep-alives over etcd's JSON gateway (``schedd_coord.keepalives``), against a real etcd
with authentication on: a kept lease is renewed, one that is gone is reported as gone (and its
holder stops at once), and an endpoint that does not answer fails within the timeout."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from schedd_coord.client import EtcdClient
from schedd_coord.keepalives import KeepAliveFailed, KeepAlives
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
