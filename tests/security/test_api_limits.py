"""Attacks on the api's limits and roles by callers it knows and by callers it does not: watch
streams opened without end, unauthenticated calls repeated to flood the audit log, an operator
deleting a run. One api with tokens required and small caps serves the whole module."""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 30.0
WAIT_TIMEOUT = 30.0
PER_PRINCIPAL = 3
IN_TOTAL = 5
AUDIT_WINDOW_SECONDS = 2
WATCH_RUN = "/schedd.v1.RunService/WatchRun"
WATCH_LOGS = "/schedd.v1.RunService/WatchTaskLogs"


@pytest.fixture(scope="module")
def api(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """An api alone (no scheduler, no worker: a run stays unfinished), tokens required."""
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("limits"),
        schedulers=0,
        workers=0,
        registries=0,
        auth=True,
        service_env={
            "SCHEDD_API_MAX_WATCHES_PER_PRINCIPAL": str(PER_PRINCIPAL),
            "SCHEDD_API_MAX_WATCHES": str(IN_TOTAL),
            "SCHEDD_AUDIT_REFUSAL_WINDOW_SECONDS": str(AUDIT_WINDOW_SECONDS),
        },
    ) as cluster:
        yield cluster


def rpc(cluster: Cluster, method: str, request: Message, reply: type[Message], credential: str) -> Any:
    """One call that must succeed, its reply decoded as ``reply``."""
    with grpc.insecure_channel(cluster.api_address) as channel:
        stub = channel.unary_unary(
            method, request_serializer=lambda m: m.SerializeToString(), response_deserializer=reply.FromString
        )
        return stub(request, timeout=RPC_TIMEOUT, metadata=(("authorization", f"Bearer {credential}"),))


def token(cluster: Cluster, name: str, role: str) -> str:
    request = api_pb2.CreateTokenRequest(name=name, role=role)
    made = rpc(
        cluster,
        "/schedd.v1.TokenService/CreateToken",
        request,
        api_pb2.CreateTokenResponse,
        cluster.admin_token,
    )
    return str(made.secret)


def a_run(cluster: Cluster, dag_id: str) -> str:
    """The name of a new run of a new one-task DAG (unfinished: nothing schedules it)."""
    spec = json_format.ParseDict(
        {"dag_id": dag_id, "tasks": [{"task_id": "t", "shell": {"command": "true"}}]}, pb.DagSpec()
    )
    admin = cluster.admin_token
    rpc(
        cluster,
        "/schedd.v1.DagService/RegisterDag",
        api_pb2.RegisterDagRequest(spec=spec),
        api_pb2.RegisterDagResponse,
        admin,
    )
    created = api_pb2.CreateRunRequest(parent=f"dags/{dag_id}", run_id="r1")
    return str(rpc(cluster, "/schedd.v1.RunService/CreateRun", created, pb.DagRun, admin).name)


def unary(cluster: Cluster, method: str, request: Message, credential: str | None) -> grpc.RpcError | bytes:
    metadata = (("authorization", f"Bearer {credential}"),) if credential else ()
    with grpc.insecure_channel(cluster.api_address) as channel:
        stub = channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        try:
            return stub(request, timeout=RPC_TIMEOUT, metadata=metadata)  # type: ignore[no-any-return, unused-ignore]
        except grpc.RpcError as exc:
            return exc


class Streams:
    """Server streams opened on one channel and kept open until :meth:`close`."""

    def __init__(self, cluster: Cluster) -> None:
        self._channel = grpc.insecure_channel(cluster.api_address)
        self._open: list[Any] = []

    def open(self, method: str, request: Message, credential: str) -> grpc.RpcError | None:
        """Open a stream and read its first message; the refusal when the api refuses it."""
        stub = self._channel.unary_stream(method, request_serializer=lambda m: m.SerializeToString())
        stream = stub(request, timeout=RPC_TIMEOUT * 4, metadata=(("authorization", f"Bearer {credential}"),))
        self._open.append(stream)
        try:
            next(stream)
        except grpc.RpcError as exc:
            return exc
        return None

    def close(self) -> None:
        for stream in self._open:
            stream.cancel()
        self._open.clear()
        self._channel.close()


@pytest.fixture
def streams(api: Cluster) -> Iterator[Callable[[], Streams]]:
    opened: list[Streams] = []

    def make() -> Streams:
        opened.append(Streams(api))
        return opened[-1]

    yield make
    for each in opened:
        each.close()


def metric(cluster: Cluster, name: str) -> float:
    with urllib.request.urlopen(f"http://{cluster.metrics['api']}/metrics", timeout=RPC_TIMEOUT) as response:
        text = response.read().decode()
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} is not among the api's metrics"
    return float(match.group(1))


# -- watch streams ----------------------------------------------------------------------------------


def test_watch_streams_are_capped_per_principal_and_in_total(
    api: Cluster, streams: Callable[[], Streams]
) -> None:
    run = a_run(api, "capped")
    watch = api_pb2.GetRunRequest(name=run)
    logs = api_pb2.GetTaskLogsRequest(name=f"{run}/tasks/t")
    viewer, other = token(api, "watcher-1", "viewer"), token(api, "watcher-2", "viewer")
    mine = streams()
    assert mine.open(WATCH_RUN, watch, viewer) is None
    assert mine.open(WATCH_RUN, watch, viewer) is None
    assert mine.open(WATCH_RUN, watch, viewer) is None
    for method, request in [(WATCH_RUN, watch), (WATCH_LOGS, logs)]:
        refused = mine.open(method, request, viewer)
        assert refused is not None and refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, method
        assert "3 streams per principal" in (refused.details() or ""), refused.details()

    others = streams()
    assert others.open(WATCH_RUN, watch, other) is None
    assert others.open(WATCH_RUN, watch, other) is None
    refused = others.open(WATCH_RUN, watch, api.admin_token)
    assert refused is not None and refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "5 streams in total" in (refused.details() or ""), refused.details()

    mine.close()
    wait_until(
        "the closed streams to be released",
        lambda: metric(api, "schedd_api_watch_streams") == 2,
        WAIT_TIMEOUT,
        interval=0.1,
    )
    assert streams().open(WATCH_RUN, watch, viewer) is None


def test_every_stream_watching_one_run_shares_one_database_poller(
    api: Cluster, streams: Callable[[], Streams]
) -> None:
    run = a_run(api, "shared")
    watch = api_pb2.GetRunRequest(name=run)
    opened = [streams() for _ in range(IN_TOTAL)]
    credentials = [api.admin_token, token(api, "sharer-1", "viewer")]
    for i, each in enumerate(opened):
        assert each.open(WATCH_RUN, watch, credentials[i % 2]) is None
    assert metric(api, "schedd_api_watch_streams") == IN_TOTAL
    assert metric(api, "schedd_api_run_pollers") == 1
    for each in opened:
        each.close()
    wait_until(
        "the poller to stop with its last stream",
        lambda: metric(api, "schedd_api_run_pollers") == 0,
        WAIT_TIMEOUT,
        interval=0.1,
    )


def test_a_shared_poller_sends_each_stream_the_change(api: Cluster) -> None:
    run = a_run(api, "changing")
    with grpc.insecure_channel(api.api_address) as channel:
        stub = channel.unary_stream(
            WATCH_RUN,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.DagRun.FromString,
        )
        metadata = (("authorization", f"Bearer {api.admin_token}"),)
        one = stub(api_pb2.GetRunRequest(name=run), timeout=RPC_TIMEOUT, metadata=metadata)
        two = stub(api_pb2.GetRunRequest(name=run), timeout=RPC_TIMEOUT, metadata=metadata)
        assert next(one).state == next(two).state != pb.RUN_STATE_FAILED
        rpc(
            api,
            "/schedd.v1.RunService/CancelRun",
            api_pb2.CancelRunRequest(name=run),
            pb.DagRun,
            api.admin_token,
        )
        assert [m.state for m in one][-1] == pb.RUN_STATE_FAILED
        assert [m.state for m in two][-1] == pb.RUN_STATE_FAILED


# -- the audit log ----------------------------------------------------------------------------------


def test_repeated_unauthenticated_calls_are_counted_not_written_one_by_one(api: Cluster) -> None:
    method = "/schedd.v1.DagService/GetDag"
    calls = 300
    with grpc.insecure_channel(api.api_address) as channel:
        stub = channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        for _ in range(calls):
            with pytest.raises(grpc.RpcError) as refused:
                stub(api_pb2.GetDagRequest(name="dags/x"), timeout=RPC_TIMEOUT)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    query = "FROM audit_log WHERE method = $1 AND code = 'UNAUTHENTICATED' AND principal = '-'"
    rows = api.fetchval(f"SELECT count(*) {query}", method)
    assert rows <= 1 + calls // 50, f"{calls} refused calls wrote {rows} audit rows"
    wait_until(
        "the window's count to be written",
        lambda: api.fetchval(f"SELECT coalesce(sum(count), 0) {query}", method) == calls,
        WAIT_TIMEOUT,
        interval=0.1,
    )
    assert api.fetchval(f"SELECT count(*) {query}", method) <= 1 + calls // 50
    summary = api.fetch(f"SELECT peer, detail, count {query} AND count > 1", method)
    assert summary and all(
        r["peer"].startswith("ipv") and "more refused calls" in r["detail"] for r in summary
    )


def test_each_denied_call_of_a_known_token_is_written(api: Cluster) -> None:
    viewer = token(api, "denied-1", "viewer")
    for _ in range(3):
        outcome = unary(api, "/schedd.v1.DagService/PauseDag", api_pb2.PauseDagRequest(name="dags/x"), viewer)
        assert isinstance(outcome, grpc.RpcError) and outcome.code() == grpc.StatusCode.PERMISSION_DENIED
    rows = api.fetch(
        "SELECT count FROM audit_log WHERE principal = 'denied-1' AND code = 'PERMISSION_DENIED'"
    )
    assert [r["count"] for r in rows] == [1, 1, 1]


# -- roles ------------------------------------------------------------------------------------------


def test_an_operator_cannot_delete_a_run(api: Cluster) -> None:
    run = a_run(api, "kept")
    api.fetch("UPDATE dag_runs SET state = 'success' WHERE dag_id = 'kept'")  # a finished run may be deleted
    operator = token(api, "deleter-1", "operator")
    outcome = unary(api, "/schedd.v1.RunService/DeleteRun", api_pb2.DeleteRunRequest(name=run), operator)
    assert isinstance(outcome, grpc.RpcError), "an operator deleted a run"
    assert outcome.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "needs role admin" in (outcome.details() or "")
    assert api.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = 'kept'") == 1
    deleted = unary(
        api, "/schedd.v1.RunService/DeleteRun", api_pb2.DeleteRunRequest(name=run), api.admin_token
    )
    assert isinstance(deleted, bytes), deleted
    assert api.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = 'kept'") == 0


FLOOD = 1000


def test_one_callers_flood_of_calls_does_not_hold_back_another_caller(api: Cluster) -> None:
    """One client's 1,000 ``CreateRun`` calls in flight, and another caller's one call sent once
    the flood is being answered: the other caller's run is created ahead of a good part of the
    flood (488-562 of it in runs on an idle machine; how much depends on how fast the api's gRPC
    server takes in the flood's calls sent before it). Calls take turns at the api's database
    connections by token (``schedd_rpc.call_turns``); first come, first served, the call waited
    for all of the flood (0 of it behind, every run)."""
    a_run(api, "flooded")
    flooder, bystander = token(api, "flooder", "operator"), token(api, "bystander", "operator")
    answered = threading.Event()

    def create_run(channel: grpc.Channel) -> Any:
        return channel.unary_unary(
            "/schedd.v1.RunService/CreateRun",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.DagRun.FromString,
        )

    with (
        grpc.insecure_channel(api.api_address) as flood_channel,
        grpc.insecure_channel(api.api_address) as own,
    ):
        flood = [
            create_run(flood_channel).future(
                api_pb2.CreateRunRequest(parent="dags/flooded", run_id=f"flood-{i:04d}"),
                timeout=RPC_TIMEOUT * 4,
                metadata=(("authorization", f"Bearer {flooder}"),),
            )
            for i in range(FLOOD)
        ]
        for call in flood:
            call.add_done_callback(lambda _: answered.set())
        assert answered.wait(WAIT_TIMEOUT), "the flood's first call was not answered"
        run = create_run(own)(
            api_pb2.CreateRunRequest(parent="dags/flooded", run_id="bystander"),
            timeout=RPC_TIMEOUT * 4,
            metadata=(("authorization", f"Bearer {bystander}"),),
        )
        assert all(call.result().name for call in flood)
    assert run.name.endswith("/bystander")
    behind = api.fetchval(
        "SELECT count(*) FROM dag_runs WHERE dag_id = 'flooded' AND run_id LIKE 'flood-%' "
        "AND id > (SELECT id FROM dag_runs WHERE dag_id = 'flooded' AND run_id = 'bystander')"
    )
    assert behind >= FLOOD // 10, (
        f"the bystander's run was created after all but {behind} of the flood's {FLOOD}"
    )
