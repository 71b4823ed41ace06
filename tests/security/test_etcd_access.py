"""Who may touch schedd's keys in etcd: the attacks a pod that can reach etcd could try.

A client without credentials, and a worker's credentials, try to read, overwrite or delete the
scheduler's leader key and to revoke the leader's lease; etcd refuses each (an auth or permission
error) and the leader key, its lease and the fence stay as they were. A leader key that holds a
malformed value (written here with root's credentials) makes GetLeader answer FAILED_PRECONDITION
naming the key, and ``schedctl leader`` exit non-zero with that message.

The credentials themselves: a client whose token expired, or ended when its user's password was set
again, gets a new one and carries on (calls, watches and leases); a wrong password stops each
service at start-up with exit status 2 and a message naming the variables.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from aetcd import rpc

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd_coord import access
from schedd_coord.client import EtcdClient, parse_endpoints
from schedd_coord.credentials import EtcdAuth, read_etcd_auth
from schedd_coord.election import LEADER_KEY, MEMBERS_PREFIX
from schedd_coord.errors import EtcdAuthFailed
from schedd_coord.lease import KeptLease, LeaseTiming
from schedd_coord.members import worker_key
from schedd_devstack import LocalEtcd
from schedd_devstack.etcd_access import EtcdCredentials
from schedd_devstack.ports import free_port
from schedd_devstack.services import Cluster
from schedd_devstack.stack import make_base_dir
from tests.fixtures.services import cluster_on_own_database, schedctl

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 10.0
#: what etcd answers a request without a valid token or without the permission
REFUSED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
}


@pytest.fixture(scope="module")
def cluster(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("etcd-access"),
        workers=1,
    ) as running:
        yield running


def token_for(cluster: Cluster, user: str) -> str:
    """A token of ``user`` from etcd, asked with the password the cluster's services use."""
    assert cluster.etcd_credentials is not None, "the test etcd has no credentials"
    auth = cluster.etcd_credentials.auth(user)
    resp = etcd(
        cluster, "AuthStub", "Authenticate", rpc.AuthenticateRequest(name=user, password=auth.password), None
    )
    assert not isinstance(resp, grpc.RpcError), resp
    return str(resp.token)


def etcd(cluster: Cluster, stub: str, method: str, request: Any, token: str | None) -> Any:
    """One unary call to etcd as ``token`` (None: anonymous); the response, or the RpcError."""
    endpoint = parse_endpoints(cluster.etcd_endpoints)[0]
    metadata = (("token", token),) if token else ()
    with grpc.insecure_channel(endpoint) as channel:
        call = getattr(getattr(rpc, stub)(channel), method)
        try:
            return call(request, timeout=RPC_TIMEOUT, metadata=metadata)
        except grpc.RpcError as exc:
            return exc


def leader_key(cluster: Cluster) -> rpc.KeyValue:
    resp = etcd(cluster, "KVStub", "Range", rpc.RangeRequest(key=LEADER_KEY), token_for(cluster, "root"))
    assert not isinstance(resp, grpc.RpcError), resp
    assert len(resp.kvs) == 1, "nobody leads"
    return resp.kvs[0]


def assert_refused(result: Any, what: str) -> None:
    assert isinstance(result, grpc.RpcError), f"{what} was allowed"
    assert result.code() in REFUSED, (what, result.code(), result.details())
    details = result.details() or ""
    assert "permission denied" in details or "user name is empty" in details or "auth" in details, details


def attacks(lease: int) -> list[tuple[str, str, str, Any]]:
    return [
        ("read the leader key", "KVStub", "Range", rpc.RangeRequest(key=LEADER_KEY)),
        (
            "overwrite the leader key",
            "KVStub",
            "Put",
            rpc.PutRequest(key=LEADER_KEY, value=b'{"address": "evil:1"}'),
        ),
        ("delete the leader key", "KVStub", "DeleteRange", rpc.DeleteRangeRequest(key=LEADER_KEY)),
        ("add a member", "KVStub", "Put", rpc.PutRequest(key=MEMBERS_PREFIX + b"evil", value=b"{}")),
        ("revoke the leader's lease", "LeaseStub", "LeaseRevoke", rpc.LeaseRevokeRequest(ID=lease)),
    ]


def attempt_all(cluster: Cluster, token: str | None, *, reads_allowed: bool) -> None:
    before = leader_key(cluster)
    fence = cluster.fence()
    for what, stub, method, request in attacks(before.lease):
        result = etcd(cluster, stub, method, request, token)
        if reads_allowed and method == "Range":
            assert not isinstance(result, grpc.RpcError) and len(result.kvs) == 1, result
            continue
        assert_refused(result, what)
    after = leader_key(cluster)
    assert (after.create_revision, after.mod_revision, after.lease, after.value) == (
        before.create_revision,
        before.mod_revision,
        before.lease,
        before.value,
    )
    assert cluster.fence() == fence
    assert cluster.leader() is not None


def test_a_client_without_credentials_cannot_touch_the_leader_key_or_its_lease(cluster: Cluster) -> None:
    attempt_all(cluster, None, reads_allowed=False)


def test_a_workers_credentials_cannot_touch_the_election_prefix(cluster: Cluster) -> None:
    [worker_id] = cluster.workers
    live = etcd(
        cluster, "KVStub", "Range", rpc.RangeRequest(key=worker_key(worker_id)), token_for(cluster, "root")
    )
    assert len(live.kvs) == 1, "the worker keeps its liveness key as schedd-worker"
    worker = token_for(cluster, "schedd-worker")
    attempt_all(cluster, worker, reads_allowed=False)
    own = etcd(cluster, "KVStub", "Put", rpc.PutRequest(key=worker_key("worker-probe"), value=b"{}"), worker)
    assert not isinstance(own, grpc.RpcError), own
    etcd(cluster, "KVStub", "DeleteRange", rpc.DeleteRangeRequest(key=worker_key("worker-probe")), worker)


def test_the_apis_credentials_only_read_the_election_prefix(cluster: Cluster) -> None:
    attempt_all(cluster, token_for(cluster, "schedd-api"), reads_allowed=True)


def test_a_malformed_leader_value_is_failed_precondition_for_getleader_and_schedctl(cluster: Cluster) -> None:
    original = leader_key(cluster)
    root = token_for(cluster, "root")
    for forged in (b"not json", b'["a list"]', b'{"identity": 7}'):
        put = rpc.PutRequest(key=LEADER_KEY, value=forged, lease=original.lease)
        assert not isinstance(etcd(cluster, "KVStub", "Put", put, root), grpc.RpcError)
        try:
            with grpc.insecure_channel(cluster.api_address) as channel:
                stub = api_pb2_grpc.ClusterServiceStub(channel)
                with pytest.raises(grpc.RpcError) as refused:
                    stub.GetLeader(api_pb2.GetLeaderRequest(), timeout=RPC_TIMEOUT)
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.value.details()
            assert "the leader key holds a malformed value" in (refused.value.details() or "")
            result = schedctl(cluster.api_address, "leader")
            assert result.returncode == 2, result
            assert "the leader key holds a malformed value" in result.stderr
        finally:
            restore = rpc.PutRequest(key=LEADER_KEY, value=original.value, lease=original.lease)
            assert not isinstance(etcd(cluster, "KVStub", "Put", restore, root), grpc.RpcError)
    assert schedctl(cluster.api_address, "leader").returncode == 0


# -- the client's credentials ---------------------------------------------------------------------

TOKEN_TTL = 1
FAST = LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.3)


@pytest.fixture(scope="module")
def short_tokens() -> Iterator[tuple[str, EtcdCredentials]]:
    """An etcd of this module, authentication on, whose tokens expire after one idle second."""
    base_dir = make_base_dir("schedd-test-etcd-")
    server = LocalEtcd(auth=True, auth_token_ttl=TOKEN_TTL)
    try:
        server.start(base_dir, durable=False)
        assert server.credentials is not None
        yield server.endpoint, server.credentials
    finally:
        server.stop()


@pytest.fixture
async def scheduler_client(short_tokens: tuple[str, EtcdCredentials]) -> AsyncIterator[EtcdClient]:
    endpoint, credentials = short_tokens
    client = EtcdClient(endpoint, auth=credentials.auth(access.SCHEDULER_USER))
    yield client
    await client.close()


def refused_reason(endpoint: str, token: str) -> str:
    """What etcd says to a read with ``token`` ("" when it answers)."""
    with grpc.insecure_channel(endpoint) as channel:
        try:
            rpc.KVStub(channel).Range(
                rpc.RangeRequest(key=access.SCHEDULER_PREFIX),
                timeout=RPC_TIMEOUT,
                metadata=(("token", token),),
            )
        except grpc.RpcError as exc:
            return str(exc.details() or exc.code().name)
    return ""


def wait_until_expired(endpoint: str, token: str) -> None:
    """Leave ``token`` unused past its TTL until etcd refuses it (each look at a live token renews it,
    so look only after a full TTL of rest); at most 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(TOKEN_TTL + 1)
        reason = refused_reason(endpoint, token)
        if reason:
            assert "invalid auth token" in reason, reason
            return
    raise AssertionError("etcd kept accepting a token left unused past its TTL")


async def test_a_client_keeps_working_after_its_token_expires(
    short_tokens: tuple[str, EtcdCredentials], scheduler_client: EtcdClient
) -> None:
    endpoint, _ = short_tokens
    key = access.SCHEDULER_PREFIX + f"expiry-{uuid.uuid4().hex}".encode()
    await scheduler_client.put(key, b"1")
    expired = await scheduler_client.tokens.current()
    await asyncio.to_thread(wait_until_expired, endpoint, expired)

    assert (await scheduler_client.get(key)) is not None  # a unary call renews the token
    assert await scheduler_client.tokens.current() != expired
    await asyncio.to_thread(wait_until_expired, endpoint, await scheduler_client.tokens.current())
    revision = await scheduler_client.ping()
    watch = scheduler_client.watch(key, start_revision=revision + 1)  # a watch renews it too
    first = asyncio.ensure_future(anext(watch))
    writer = EtcdClient(endpoint, auth=short_tokens[1].auth(access.SCHEDULER_USER))
    try:
        await writer.put(key, b"2")
        events = await asyncio.wait_for(first, RPC_TIMEOUT)
        assert [(kind, kv.value) for kind, kv in events] == [("put", b"2")]
    finally:
        first.cancel()
        await watch.aclose()
        await writer.close()


async def test_a_token_invalidated_by_a_new_password_is_renewed(etcd_endpoints: str) -> None:
    """Setting a user's password (as every run of the set-up routine does) ends its tokens."""
    credentials = EtcdCredentials.from_env(os.environ)
    assert credentials is not None
    auth = credentials.auth(access.SCHEDULER_USER)
    client = EtcdClient(etcd_endpoints, auth=auth)
    root = EtcdClient(etcd_endpoints, auth=credentials.auth(access.ROOT_USER))
    key = access.SCHEDULER_PREFIX + f"renewed-{uuid.uuid4().hex}".encode()
    lease = KeptLease(etcd_endpoints, FAST, auth=auth)
    try:
        await client.put(key, b"1")
        await lease.start()
        before = await client.tokens.current()
        change = rpc.AuthUserChangePasswordRequest(name=auth.user, password=auth.password)
        await root.unary(root.auth.UserChangePassword, change)
        assert "invalid auth token" in refused_reason(etcd_endpoints, before)

        created, _, _ = await client.create_if_absent(key + b"/held", b"x", lease=lease.lease_id)
        assert created and await client.tokens.current() != before
        await lease.stop(revoke=True)  # the lease thread's client renews its token too
        assert await client.get(key + b"/held") is None
        await client.delete(key)
    finally:
        await lease.stop(revoke=True)
        await client.close()
        await root.close()


async def test_a_wrong_password_is_refused_by_name(short_tokens: tuple[str, EtcdCredentials]) -> None:
    endpoint, _ = short_tokens
    client = EtcdClient(endpoint, auth=EtcdAuth(access.SCHEDULER_USER, "not-the-password"))
    try:
        with pytest.raises(EtcdAuthFailed, match="SCHEDD_ETCD_USER and SCHEDD_ETCD_PASSWORD"):
            await client.ping()
    finally:
        await client.close()


def test_credentials_settings_are_checked_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="neither SCHEDD_ETCD_PASSWORD nor SCHEDD_ETCD_PASSWORD_FILE"):
        read_etcd_auth({"SCHEDD_ETCD_USER": "u"})
    with pytest.raises(ValueError, match="SCHEDD_ETCD_USER is needed"):
        read_etcd_auth({"SCHEDD_ETCD_PASSWORD": "p"})
    with pytest.raises(ValueError, match="not both"):
        read_etcd_auth(
            {"SCHEDD_ETCD_USER": "u", "SCHEDD_ETCD_PASSWORD": "p", "SCHEDD_ETCD_PASSWORD_FILE": "f"}
        )
    with pytest.raises(ValueError, match="SCHEDD_ETCD_PASSWORD_FILE: cannot read"):
        read_etcd_auth({"SCHEDD_ETCD_USER": "u", "SCHEDD_ETCD_PASSWORD_FILE": str(tmp_path / "missing")})
    (tmp_path / "pw").write_text("secret\n")
    auth = read_etcd_auth({"SCHEDD_ETCD_USER": "u", "SCHEDD_ETCD_PASSWORD_FILE": str(tmp_path / "pw")})
    assert auth == EtcdAuth("u", "secret") and "secret" not in repr(auth)
    assert read_etcd_auth({}) is None


@pytest.mark.parametrize(
    ("module", "user"),
    [
        ("schedd_scheduler.main", access.SCHEDULER_USER),
        ("schedd_api.main", access.API_USER),
        ("schedd_worker.main", access.WORKER_USER),
    ],
)
def test_a_wrong_password_stops_a_service_at_start_up(
    database_url: str, etcd_endpoints: str, module: str, user: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")}
    env.update(
        {
            "SCHEDD_DATABASE_URL": database_url,
            "SCHEDD_ETCD_ENDPOINTS": etcd_endpoints,
            "SCHEDD_ETCD_USER": user,
            "SCHEDD_ETCD_PASSWORD": "not-the-password",
            "SCHEDD_API_LISTEN": f"127.0.0.1:{free_port()}",
            "SCHEDD_REGISTRY": f"127.0.0.1:{free_port()}",
            "SCHEDD_AUTH": "none",
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert f"etcd refused user {user!r}" in result.stderr and "SCHEDD_ETCD_PASSWORD" in result.stderr
    assert "Traceback" not in result.stderr
