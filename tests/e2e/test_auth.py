"""Authentication, roles and the audit log on a cluster with tokens required (``Cluster(auth=True)``):
every RPC without a token is UNAUTHENTICATED, a viewer on every call that changes something is
PERMISSION_DENIED, both are audited and change nothing; forged, revoked and expired tokens are
refused at once; workers connect with worker tokens only, as the worker id they are bound to; and
schedctl drives tokens and the audit log with distinct exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from schedd.v1 import api_pb2, assets_pb2, secrets_pb2, worker_pb2
from schedd_auth import roles
from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database, schedctl

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 30.0
EXIT_AUTH = 4

API_METHODS = [
    (f"/{service.full_name}/{method.name}", GetMessageClass(method.input_type))
    for service in (
        *api_pb2.DESCRIPTOR.services_by_name.values(),
        *assets_pb2.DESCRIPTOR.services_by_name.values(),
        secrets_pb2.DESCRIPTOR.services_by_name["SecretsService"],
    )
    for method in service.methods
]
MUTATING = [(m, cls) for m, cls in API_METHODS if roles.METHODS[m].role != roles.VIEWER]


@pytest.fixture(scope="module")
def secured(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("auth"),
        workers=1,
        auth=True,
    ) as cluster:
        yield cluster


def call(address: str, method: str, request: Message, token: str | None) -> grpc.RpcError | bytes:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(address) as channel:
        stub = channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        try:
            return stub(request, timeout=RPC_TIMEOUT, metadata=metadata)  # type: ignore[no-any-return, unused-ignore]
        except grpc.RpcError as exc:
            return exc


def token(cluster: Cluster, name: str, role: str, *extra: str) -> str:
    result = schedctl(
        cluster.api_address, "--token", cluster.admin_token, "tokens", "create", name, "--role", role, *extra
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def snapshot(cluster: Cluster) -> dict[str, Any]:
    tables = [
        "dags",
        "dag_versions",
        "dag_runs",
        "task_instances",
        "pools",
        "backfills",
        "api_tokens",
        "asset_events",
    ]
    counts = {t: cluster.fetchval(f"SELECT count(*) FROM {t}") for t in tables}
    counts["paused"] = cluster.fetchval("SELECT count(*) FROM dags WHERE paused")
    counts["draining"] = cluster.fetchval("SELECT count(*) FROM workers WHERE state <> 'active'")
    counts["revoked"] = cluster.fetchval("SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL")
    return counts


def audited(cluster: Cluster, code: str, principal: str) -> set[str]:
    rows = cluster.fetch("SELECT method FROM audit_log WHERE code = $1 AND principal = $2", code, principal)
    return {r["method"] for r in rows}


def test_every_rpc_without_a_token_is_unauthenticated_audited_and_changes_nothing(secured: Cluster) -> None:
    before = snapshot(secured)
    for method, request_class in API_METHODS:
        outcome = call(secured.api_address, method, request_class(), None)
        assert isinstance(outcome, grpc.RpcError), method
        assert outcome.code() == grpc.StatusCode.UNAUTHENTICATED, (method, outcome.details())
        assert "bearer token" in (outcome.details() or "")
    assert snapshot(secured) == before
    assert audited(secured, "UNAUTHENTICATED", "-") >= {m for m, _ in API_METHODS}


def test_a_viewer_is_denied_every_call_that_changes_something(secured: Cluster) -> None:
    viewer = token(secured, "viewer-1", "viewer")
    before = snapshot(secured)
    for method, request_class in MUTATING:
        outcome = call(secured.api_address, method, request_class(), viewer)
        assert isinstance(outcome, grpc.RpcError), method
        assert outcome.code() == grpc.StatusCode.PERMISSION_DENIED, (method, outcome.details())
        assert "viewer" in (outcome.details() or "")
    assert snapshot(secured) == before
    assert audited(secured, "PERMISSION_DENIED", "viewer-1") == {m for m, _ in MUTATING}
    listed = call(secured.api_address, "/schedd.v1.DagService/ListDags", api_pb2.ListDagsRequest(), viewer)
    assert isinstance(listed, bytes), listed


def test_forged_revoked_and_expired_tokens_are_refused_at_once(secured: Cluster) -> None:
    method, request = "/schedd.v1.DagService/ListDags", api_pb2.ListDagsRequest()
    operator = token(secured, "operator-1", "operator")
    assert isinstance(call(secured.api_address, method, request, operator), bytes)
    forged = operator[:-4] + ("AAAA" if not operator.endswith("AAAA") else "BBBB")
    for bad, why in [
        ("sdt_000000000000_" + "x" * 43, "unknown token"),
        (forged, "unknown token"),
        ("not-a-token", "malformed"),
    ]:
        outcome = call(secured.api_address, method, request, bad)
        assert isinstance(outcome, grpc.RpcError) and outcome.code() == grpc.StatusCode.UNAUTHENTICATED, bad
        assert why in (outcome.details() or ""), outcome.details()
    expiring = token(secured, "expiring-1", "viewer", "--expires-in", "1d")
    assert isinstance(call(secured.api_address, method, request, expiring), bytes)
    secured.fetch("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'expiring-1'")
    outcome = call(secured.api_address, method, request, expiring)
    assert isinstance(outcome, grpc.RpcError) and outcome.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "expired" in (outcome.details() or "")
    revoke = schedctl(secured.api_address, "--token", secured.admin_token, "tokens", "revoke", "operator-1")
    assert revoke.returncode == 0, revoke.stderr
    outcome = call(secured.api_address, method, request, operator)
    assert isinstance(outcome, grpc.RpcError) and outcome.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "revoked" in (outcome.details() or "")


def test_worker_tokens_speak_only_the_worker_protocol(secured: Cluster) -> None:
    worker = token(secured, "worker-token-1", "worker")
    outcome = call(secured.api_address, "/schedd.v1.DagService/ListDags", api_pb2.ListDagsRequest(), worker)
    assert isinstance(outcome, grpc.RpcError) and outcome.code() == grpc.StatusCode.PERMISSION_DENIED
    for credential, code in [
        (None, grpc.StatusCode.UNAUTHENTICATED),
        (secured.admin_token, grpc.StatusCode.PERMISSION_DENIED),
    ]:
        assert connect(secured.registry_address, credential, "intruder") == code
    bound = token(secured, "worker-token-2", "worker", "--worker-id", "w-bound")
    assert connect(secured.registry_address, bound, "w-other") == grpc.StatusCode.PERMISSION_DENIED
    assert not secured.fetch("SELECT 1 FROM workers WHERE worker_id IN ('intruder', 'w-other')")


def connect(registry: str, credential: str | None, worker_id: str) -> grpc.StatusCode:
    """Open a worker stream, say hello as ``worker_id``, and return how the stream ended."""
    hello = worker_pb2.WorkerMessage(
        hello=worker_pb2.WorkerHello(worker_id=worker_id, capacity=1, incarnation="x")
    )
    hello.hello.kill_grace.FromSeconds(1)
    metadata = (("authorization", f"Bearer {credential}"),) if credential else ()
    with grpc.insecure_channel(registry) as channel:
        stream = channel.stream_stream(
            "/schedd.v1.WorkerRegistry/Connect",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=worker_pb2.RegistryMessage.FromString,
        )
        try:
            for _ in stream(iter([hello]), timeout=RPC_TIMEOUT, metadata=metadata):
                pass
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return, unused-ignore]
    return grpc.StatusCode.OK


def test_a_run_goes_through_with_an_operator_token_and_a_worker_token(
    secured: Cluster, tmp_path: Path
) -> None:
    spec = tmp_path / "secured.json"
    spec.write_text(
        json.dumps({"dag_id": "secured", "tasks": [{"task_id": "t", "shell": {"command": "true"}}]})
    )
    admin = ("--token", secured.admin_token)
    assert schedctl(secured.api_address, *admin, "dags", "register", str(spec)).returncode == 0
    operator = token(secured, "operator-2", "operator")
    result = schedctl(
        secured.api_address, "--token", operator, "runs", "trigger", "secured", "--run-id", "r1", "--wait"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = secured.fetch(
        "SELECT principal, request_id, resource, code FROM audit_log "
        "WHERE method = '/schedd.v1.RunService/CreateRun'"
    )
    assert any(
        r["principal"] == "operator-2" and r["code"] == "OK" and r["resource"] == "dags/secured" for r in rows
    )


def test_schedctl_exit_codes_and_the_audit_command(secured: Cluster) -> None:
    missing = schedctl(secured.api_address, "dags", "list")
    assert missing.returncode == EXIT_AUTH, missing.stderr
    assert "UNAUTHENTICATED" in missing.stderr and "--token" in missing.stderr
    viewer = token(secured, "viewer-2", "viewer")
    denied = schedctl(secured.api_address, "--token", viewer, "pools", "set", "p", "3")
    assert denied.returncode == EXIT_AUTH and "PERMISSION_DENIED" in denied.stderr
    listed = schedctl(secured.api_address, "--token", secured.admin_token, "-o", "json", "tokens", "list")
    names = {t["name"] for t in json.loads(listed.stdout)}
    assert {"tokens/viewer-2", f"tokens/admin-{secured.tag}"} <= names
    assert "secret" not in listed.stdout
    records = schedctl(
        secured.api_address,
        "--token",
        secured.admin_token,
        "-o",
        "json",
        "audit",
        "list",
        "--principal",
        "viewer-2",
    )
    assert records.returncode == 0, records.stderr
    entries = json.loads(records.stdout)
    assert any(e["method"].endswith("/SetPool") and e["code"] == "PERMISSION_DENIED" for e in entries), (
        entries
    )
    not_admin = schedctl(secured.api_address, "--token", viewer, "audit", "list")
    assert not_admin.returncode == EXIT_AUTH
    dup = schedctl(secured.api_address, "--token", secured.admin_token, "tokens", "create", "viewer-2")
    assert dup.returncode == 2 and "exists already" in dup.stderr
    bad_role = schedctl(
        secured.api_address, "--token", secured.admin_token, "tokens", "create", "x", "--role", "root"
    )
    assert bad_role.returncode == 2 and "role" in bad_role.stderr


def test_only_an_operator_may_record_an_asset_event(secured: Cluster) -> None:
    viewer = token(secured, "viewer-assets", "viewer")
    operator = token(secured, "operator-assets", "operator")
    for who, expected in [(None, "UNAUTHENTICATED"), (viewer, "PERMISSION_DENIED")]:
        args = ["--token", who] if who else []
        refused = schedctl(secured.api_address, *args, "assets", "emit", "s3://b/secured")
        assert refused.returncode == EXIT_AUTH, refused.stderr
        assert secured.fetchval("SELECT count(*) FROM asset_events") == 0, expected
    listed = schedctl(secured.api_address, "--token", viewer, "assets", "events")
    assert listed.returncode == 0, listed.stderr
    recorded = schedctl(secured.api_address, "--token", operator, "assets", "emit", "s3://b/secured")
    assert recorded.returncode == 0, recorded.stderr
    assert secured.fetchval("SELECT count(*) FROM asset_events") == 1
    assert audited(secured, "OK", "operator-assets") >= {"/schedd.v1.AssetService/CreateAssetEvent"}
