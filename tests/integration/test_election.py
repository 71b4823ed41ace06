"""Election and leases against a real etcd: one leader at a time, growing tokens, fail-stop."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schedd_coord.client import EtcdClient
from schedd_coord.election import Election
from schedd_coord.lease import KeptLease, LeaseTiming
from tests.fixtures.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

FAST = LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.3)


@pytest.fixture
async def etcd(etcd_endpoints: str) -> AsyncIterator[EtcdClient]:
    client = EtcdClient(etcd_endpoints)
    yield client
    await client.close()


@pytest.fixture
def key() -> bytes:
    """A leader key of this test alone, so tests never see each other's leaders."""
    return f"/test/{uuid.uuid4().hex}/leader".encode()


async def test_one_leader_and_tokens_grow(
    etcd: EtcdClient, etcd_endpoints: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = Election(etcd, identity="a", key=key), Election(etcd, identity="b", key=key)
    lease_a, lease_b = KeptLease(etcd_endpoints, FAST), KeptLease(etcd_endpoints, FAST)
    await lease_a.start()
    await lease_b.start()
    try:
        token_a = await asyncio.wait_for(a.campaign(lease_a.lease_id), 5)
        refused = asyncio.Event()
        create_if_absent = etcd.create_if_absent

        async def observed(*args: Any, **kwargs: Any) -> Any:
            result = await create_if_absent(*args, **kwargs)
            if not result[0]:
                refused.set()
            return result

        monkeypatch.setattr(etcd, "create_if_absent", observed)
        waiting = asyncio.create_task(b.campaign(lease_b.lease_id))
        await asyncio.wait_for(refused.wait(), 5)  # b tried to lead and was refused: a leads
        assert not waiting.done()
        leader = await a.leader()
        assert leader is not None and (leader.identity, leader.token) == ("a", token_a)
        assert await a.resign(token_a)
        token_b = await asyncio.wait_for(waiting, 5)
        assert token_b > token_a
        assert not await a.resign(token_a), "a stale term's resignation must not delete the new key"
        leader = await b.leader()
        assert leader is not None and leader.identity == "b"
    finally:
        await lease_a.stop(revoke=True)
        await lease_b.stop(revoke=True)


async def test_a_crashed_leaders_key_expires_with_its_lease(
    etcd: EtcdClient, etcd_endpoints: str, key: bytes
) -> None:
    a, b = Election(etcd, identity="a", key=key), Election(etcd, identity="b", key=key)
    lease_a, lease_b = KeptLease(etcd_endpoints, FAST), KeptLease(etcd_endpoints, FAST)
    await lease_a.start()
    await lease_b.start()
    try:
        token_a = await a.campaign(lease_a.lease_id)
        waiting = asyncio.create_task(b.campaign(lease_b.lease_id))
        await lease_a.stop(revoke=False)  # a "crashes": no more keep-alives, no revoke
        token_b = await asyncio.wait_for(waiting, FAST.ttl + 3)
        assert token_b > token_a
        assert b.vacancy_seen_at is not None
    finally:
        await lease_b.stop(revoke=True)


async def test_kept_lease_stays_valid_while_renewed(etcd_endpoints: str) -> None:
    lease = KeptLease(etcd_endpoints, FAST)
    await lease.start()
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lease.lost.wait(), FAST.ttl * 2)
        assert lease.valid
    finally:
        await lease.stop(revoke=True)


async def test_partitioned_holder_stops_before_its_lease_can_expire(etcd_endpoints: str, key: bytes) -> None:
    """Cut a leader off from etcd: it gives up within renew_deadline, and only after that can a
    standby win, because etcd keeps the lease for the full TTL."""
    proxy = TcpProxy(etcd_endpoints).start()
    cut_off = EtcdClient(proxy.endpoint, timeout=0.5)
    direct = EtcdClient(etcd_endpoints)
    loop = asyncio.get_running_loop()
    try:
        a, b = Election(cut_off, identity="a", key=key), Election(direct, identity="b", key=key)
        lease_a = KeptLease(proxy.endpoint, FAST, rpc_timeout=0.5)
        lease_b = KeptLease(etcd_endpoints, FAST)
        await lease_a.start()
        await lease_b.start()
        await a.campaign(lease_a.lease_id)
        standby = asyncio.create_task(b.campaign(lease_b.lease_id))
        proxy.blackhole()
        partitioned_at = loop.time()
        await asyncio.wait_for(lease_a.lost.wait(), FAST.ttl + 2)
        stopped_at = loop.time()
        await asyncio.wait_for(standby, FAST.ttl + 3)
        won_at = loop.time()
        assert stopped_at - partitioned_at < FAST.ttl, "the cut-off leader must stop within one TTL"
        assert stopped_at < won_at, "the cut-off leader must stop before the standby wins"
        await lease_b.stop(revoke=True)
        await lease_a.stop(revoke=False)
    finally:
        await cut_off.close()
        await direct.close()
        proxy.stop()


async def test_a_kept_lease_survives_a_blocked_event_loop(etcd_endpoints: str) -> None:
    """The keep-alive runs on its own thread: an owner that blocks its event loop for longer than
    the TTL (a long CPU-bound pass) still holds a valid lease afterwards."""
    lease = KeptLease(etcd_endpoints, FAST)
    await lease.start()
    try:
        time.sleep(FAST.ttl * 1.5)  # noqa: ASYNC251  # blocking the owner's loop is the point
        assert lease.remaining() > 0, "the lease was not renewed while the owner's loop was blocked"
        assert lease.valid
    finally:
        await lease.stop(revoke=True)
