"""A large message before authentication: every server (the api and the registry) refuses a message
over its receive limit with RESOURCE_EXHAUSTED before any handler or token check runs, so an
anonymous peer cannot make a server buffer more than the limit; a code bundle larger than the limit
still uploads, as a stream of pieces."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from schedd.v1 import api_pb2, worker_pb2
from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database, schedctl

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 30.0
FIVE_MIB = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def secured(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("message-size"),
        workers=0,
        auth=True,
    ) as cluster:
        yield cluster


def unary(address: str, method: str, request: bytes, token: str = "") -> grpc.RpcError | None:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(address, options=[("grpc.max_send_message_length", -1)]) as channel:
        stub = channel.unary_unary(method)
        try:
            stub(request, timeout=RPC_TIMEOUT, metadata=metadata)
        except grpc.RpcError as exc:
            return exc
    return None


def audit_rows(cluster: Cluster) -> int:
    return int(cluster.fetchval("SELECT count(*) FROM audit_log"))


def test_a_five_mib_message_without_a_token_is_refused_before_authentication(secured: Cluster) -> None:
    big_dag = api_pb2.RegisterDagRequest(request_id="r" * FIVE_MIB).SerializeToString()
    big_fetch = worker_pb2.FetchBundleRequest(sha256="f" * FIVE_MIB).SerializeToString()
    before = audit_rows(secured)
    for address, method, request in [
        (secured.api_address, "/schedd.v1.DagService/RegisterDag", big_dag),
        (secured.registry_address, "/schedd.v1.WorkerRegistry/FetchBundle", big_fetch),
    ]:
        refused = unary(address, method, request)
        assert refused is not None, method
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (method, refused)
    # Refused by gRPC itself, before the access interceptor: no token was looked up, no row written.
    assert audit_rows(secured) == before
    assert secured.fetchval("SELECT count(*) FROM dags") == 0


def test_one_large_message_is_refused_even_with_an_admin_token(secured: Cluster) -> None:
    request = api_pb2.UploadBundleRequest(archive=b"\0" * FIVE_MIB, sha256="0" * 64).SerializeToString()
    refused = unary(
        secured.api_address, "/schedd.v1.BundleService/UploadBundle", request, secured.admin_token
    )
    assert refused is not None and refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused
    assert secured.fetchval("SELECT count(*) FROM code_bundles") == 0


def test_a_bundle_larger_than_the_message_limit_uploads_in_pieces(secured: Cluster, tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "mod.py").write_text("def run():\n    return 1\n")
    (code / "data.bin").write_bytes(os.urandom(6 * 1024 * 1024))
    spec = tmp_path / "big.yaml"
    spec.write_text("dag_id: big_bundle\ntasks:\n  - task_id: t\n    python: {target: 'mod:run'}\n")
    result = schedctl(
        secured.api_address,
        "--token",
        secured.admin_token,
        "dags",
        "register",
        str(spec),
        "--bundle",
        str(code),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    stored = secured.fetch("SELECT sha256, size_bytes, archive FROM code_bundles")
    assert len(stored) == 1 and stored[0]["size_bytes"] > 6 * 1024 * 1024
    assert hashlib.sha256(stored[0]["archive"]).hexdigest() == stored[0]["sha256"]
