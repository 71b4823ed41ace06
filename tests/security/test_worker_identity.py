"""Worker identity, attacked on a cluster with tokens required (``Cluster(auth=True)``).

A worker reports only the attempts it holds: an attacker with a worker token of its own forges every
kind of report (a success, a log chunk, a heartbeat, a hand-back, a reschedule, a soft-fail skip)
for an attempt another worker runs, and each is refused and changes nothing. A second stream for a
worker id that is connected is refused and leaves the live worker's attempts alone. A token limited
to queues cannot subscribe to others. An enrollment token enrolls workers, each with a token bound
to its id and the enrollment token's queues, and can do nothing else; a used-up or expired one
enrolls nobody. The per-attempt log cap holds whatever offsets a worker sends.

The attacker speaks the worker protocol over raw gRPC streams (``tests.security.raw_worker``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from schedd.v1 import api_pb2, secrets_pb2, worker_pb2
from schedd_core.limits import MAX_LOG_BYTES_PER_ATTEMPT
from schedd_devstack.services import Cluster
from tests.fixtures.services import cluster_on_own_database, schedctl
from tests.polling import wait_until
from tests.security.raw_worker import RawWorker

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 30.0
#: Bound (seconds) on waiting for a state the cluster reaches on its own.
LIVENESS = 60.0
ENROLL = "/schedd.v1.WorkerRegistry/Enroll"

ATTEMPT = """
SELECT ti.id, ti.try_number, ti.attempt_id::text AS attempt_id, ti.worker_id, ti.state, ti.lost_reported,
       a.state AS attempt_state
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
LEFT JOIN task_attempts a ON a.attempt_id = ti.attempt_id
WHERE r.dag_id = $1 AND r.run_id = $2 AND ti.task_id = $3
"""


@pytest.fixture(scope="module")
def secured(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("identity"),
        workers=1,
        auth=True,
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def victim_dag(secured: Cluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A DAG whose first task sleeps (the attempt under attack) before a downstream task."""
    spec = tmp_path_factory.mktemp("dags") / "victim.json"
    spec.write_text(
        json.dumps(
            {
                "dag_id": "victim",
                "tasks": [
                    {"task_id": "slow", "shell": {"command": "sleep 60"}},
                    {"task_id": "after", "upstream": ["slow"], "shell": {"command": "true"}},
                ],
            }
        )
    )
    registered = admin(secured, "dags", "register", str(spec))
    assert registered.returncode == 0, registered.stderr
    return "victim"


def admin(cluster: Cluster, *args: str) -> Any:
    return schedctl(cluster.api_address, "--token", cluster.admin_token, *args)


def new_token(cluster: Cluster, name: str, role: str, *extra: str) -> str:
    result = admin(cluster, "tokens", "create", name, "--role", role, *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return str(result.stdout.strip())


def running_attempt(cluster: Cluster, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        rows = cluster.fetch(ATTEMPT, dag_id, run_id, task_id)
        return rows[0] if rows and rows[0]["state"] == "running" else None

    return dict(wait_until(f"{dag_id}/{run_id}/{task_id} to run", probe, LIVENESS, interval=0.1))


def trigger(cluster: Cluster, dag_id: str) -> str:
    run_id = f"r{secrets.token_hex(4)}"
    result = admin(cluster, "runs", "trigger", dag_id, "--run-id", run_id)
    assert result.returncode == 0, result.stdout + result.stderr
    return run_id


def ref(attempt: dict[str, Any]) -> worker_pb2.AttemptRef:
    return worker_pb2.AttemptRef(
        task_instance_id=attempt["id"], try_number=attempt["try_number"], attempt_id=attempt["attempt_id"]
    )


def _result(attempt: dict[str, Any], outcome: worker_pb2.TaskOutcome.ValueType) -> dict[str, Any]:
    result = worker_pb2.TaskResult(attempt=ref(attempt), outcome=outcome, dag_id="victim")
    result.end_time.GetCurrentTime()
    if outcome == worker_pb2.TASK_OUTCOME_RESCHEDULED:
        result.reschedule_time.GetCurrentTime()
    return {"result": result}


def _batched(single: dict[str, Any]) -> dict[str, Any]:
    result = single["result"]
    result.credit = 1
    return {"results": worker_pb2.TaskResults(results=[result])}


REPORTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "succeeded": lambda a: _result(a, worker_pb2.TASK_OUTCOME_SUCCEEDED),
    "failed": lambda a: _result(a, worker_pb2.TASK_OUTCOME_FAILED),
    "handed_back": lambda a: _result(a, worker_pb2.TASK_OUTCOME_ABANDONED),
    "rescheduled": lambda a: _result(a, worker_pb2.TASK_OUTCOME_RESCHEDULED),
    "skipped": lambda a: _result(a, worker_pb2.TASK_OUTCOME_SKIPPED),
    # results sent together (TaskResults), carrying a credit: each is checked as if sent alone
    "succeeded_in_a_batch": lambda a: _batched(_result(a, worker_pb2.TASK_OUTCOME_SUCCEEDED)),
}


@pytest.mark.parametrize("kind", sorted(REPORTS))
def test_a_forged_result_for_another_workers_attempt_is_refused_and_changes_nothing(
    secured: Cluster, victim_dag: str, kind: str
) -> None:
    run_id = trigger(secured, victim_dag)
    before = running_attempt(secured, victim_dag, run_id, "slow")
    attacker_id = f"attacker-{kind}"
    attacker = RawWorker(
        secured.registry_address,
        new_token(secured, attacker_id, "worker", "--worker-id", attacker_id),
        attacker_id,
        queues=["nothing-here"],
    )
    try:
        attacker.next("welcome")
        attacker.send(**REPORTS[kind](before))
        ack = attacker.next("ack")
        assert ack.code == grpc.StatusCode.PERMISSION_DENIED.value[0], ack
        assert "not held by worker" in ack.message and attacker_id in ack.message, ack.message
    finally:
        attacker.close()
    assert secured.fetch(ATTEMPT, victim_dag, run_id, "slow") == [before]
    assert secured.fetch(ATTEMPT, victim_dag, run_id, "after")[0]["state"] in (None, "none", "scheduled")
    admin(secured, "runs", "cancel", f"{victim_dag}/{run_id}")


def test_forged_log_chunks_and_heartbeats_for_another_workers_attempt_change_nothing(
    secured: Cluster, victim_dag: str
) -> None:
    run_id = trigger(secured, victim_dag)
    before = running_attempt(secured, victim_dag, run_id, "slow")
    attacker = RawWorker(
        secured.registry_address,
        new_token(secured, "attacker-logs", "worker", "--worker-id", "attacker-logs"),
        "attacker-logs",
        queues=["nothing-here"],
    )
    try:
        attacker.next("welcome")
        attacker.send(log=worker_pb2.LogChunk(attempt=ref(before), offset=0, data="forged output\n"))
        attacker.send(heartbeat=worker_pb2.TaskHeartbeat(attempts=[ref(before)], sequence=1))
        assert attacker.next("heartbeat_ack").sequence == 1
        cancel = attacker.next("cancel")
        assert [a.attempt_id for a in cancel.attempts] == [before["attempt_id"]]
        assert attacker.finish() is None
    finally:
        attacker.close()
    assert not secured.fetch("SELECT 1 FROM task_logs WHERE attempt_id = $1::uuid", before["attempt_id"])
    assert secured.fetch(ATTEMPT, victim_dag, run_id, "slow") == [before]
    worker = secured.fetch("SELECT running FROM workers WHERE worker_id = $1", before["worker_id"])
    assert worker and worker[0]["running"] <= 1
    admin(secured, "runs", "cancel", f"{victim_dag}/{run_id}")


def test_a_second_stream_for_a_connected_worker_is_refused_and_its_attempts_stay(
    secured: Cluster, victim_dag: str
) -> None:
    run_id = trigger(secured, victim_dag)
    before = running_attempt(secured, victim_dag, run_id, "slow")
    worker_id = before["worker_id"]
    row = "SELECT registry, incarnation, state FROM workers WHERE worker_id = $1"
    registered = secured.fetch(row, worker_id)
    impostor = RawWorker(secured.registry_address, secured.worker_token, worker_id, queues=["default"])
    try:
        ended = impostor.outcome(timeout=10)
    finally:
        impostor.close()
    assert isinstance(ended, grpc.RpcError), ended
    assert ended.code() == grpc.StatusCode.FAILED_PRECONDITION, ended.details()
    assert worker_id in (ended.details() or "") and "connected" in (ended.details() or "")
    assert secured.fetch(row, worker_id) == registered
    assert secured.fetch(ATTEMPT, victim_dag, run_id, "slow") == [before]
    admin(secured, "runs", "cancel", f"{victim_dag}/{run_id}")


def test_a_worker_reconnects_at_once_and_a_new_process_once_its_old_stream_ended(secured: Cluster) -> None:
    token = new_token(secured, "returning", "worker", "--worker-id", "returning")
    first = RawWorker(secured.registry_address, token, "returning", incarnation="one")
    again = RawWorker(secured.registry_address, token, "returning", incarnation="one")
    try:
        first.next("welcome")
        assert again.next("welcome").worker_id == "returning"  # its old stream may look live: admitted
    finally:
        first.close()
        again.close()
    gone = "SELECT 1 FROM workers WHERE worker_id = 'returning' AND state = 'gone'"
    wait_until(
        "the ended streams to leave the worker gone", lambda: secured.fetch(gone), LIVENESS, interval=0.1
    )
    restarted = RawWorker(secured.registry_address, token, "returning", incarnation="two")
    try:
        assert restarted.next("welcome").worker_id == "returning"
    finally:
        restarted.close()


def test_a_token_limited_to_queues_cannot_subscribe_to_another(secured: Cluster) -> None:
    token = new_token(secured, "pool-a-1", "worker", "--worker-id", "pool-a-1", "--queues", "qa,qb")
    for queues in (["qc"], ["qa", "qc"], []):
        stream = RawWorker(secured.registry_address, token, "pool-a-1", queues=queues)
        try:
            ended = stream.outcome()
        finally:
            stream.close()
        assert isinstance(ended, grpc.RpcError), queues
        assert ended.code() == grpc.StatusCode.PERMISSION_DENIED, ended.details()
        assert "qa, qb" in (ended.details() or ""), ended.details()
    assert not secured.fetch("SELECT 1 FROM workers WHERE worker_id = 'pool-a-1'")
    allowed = RawWorker(secured.registry_address, token, "pool-a-1", queues=["qb"])
    try:
        assert allowed.next("welcome").worker_id == "pool-a-1"
    finally:
        allowed.close()


def call(address: str, method: str, request: Message, token: str) -> grpc.RpcError | bytes:
    with grpc.insecure_channel(address) as channel:
        stub = channel.unary_unary(method, request_serializer=lambda m: m.SerializeToString())
        try:
            return stub(request, timeout=RPC_TIMEOUT, metadata=(("authorization", f"Bearer {token}"),))  # type: ignore[no-any-return, unused-ignore]
        except grpc.RpcError as exc:
            return exc


def enroll(cluster: Cluster, token: str, worker_id: str) -> worker_pb2.EnrollResponse | grpc.RpcError:
    outcome = call(cluster.registry_address, ENROLL, worker_pb2.EnrollRequest(worker_id=worker_id), token)
    return outcome if isinstance(outcome, grpc.RpcError) else worker_pb2.EnrollResponse.FromString(outcome)


def test_enrollment_gives_a_bound_token_and_a_used_up_or_expired_enrollment_token_is_refused(
    secured: Cluster,
) -> None:
    pool = new_token(secured, "pool-e", "enroll", "--max-uses", "2", "--queues", "qe", "--expires-in", "1h")
    enrolled = enroll(secured, pool, "enrolled-1")
    assert isinstance(enrolled, worker_pb2.EnrollResponse), enrolled
    assert enrolled.worker_id == "enrolled-1" and list(enrolled.queues) == ["qe"]
    stored = secured.fetch(
        "SELECT role, worker_id, queues, created_by FROM api_tokens WHERE token_id = $1",
        enrolled.token.split("_")[1],
    )
    assert stored == [{"role": "worker", "worker_id": "enrolled-1", "queues": ["qe"], "created_by": "pool-e"}]
    taken = enroll(secured, pool, "enrolled-1")
    assert isinstance(taken, grpc.RpcError) and taken.code() == grpc.StatusCode.ALREADY_EXISTS, taken
    stream = RawWorker(secured.registry_address, enrolled.token, "enrolled-1", queues=["qe"])
    try:
        assert stream.next("welcome").worker_id == "enrolled-1"
    finally:
        stream.close()
    other = RawWorker(secured.registry_address, enrolled.token, "enrolled-x", queues=["qe"])
    try:
        ended = other.outcome()
    finally:
        other.close()
    assert isinstance(ended, grpc.RpcError) and ended.code() == grpc.StatusCode.PERMISSION_DENIED
    assert isinstance(enroll(secured, pool, "enrolled-2"), worker_pb2.EnrollResponse)
    used_up = enroll(secured, pool, "enrolled-3")
    assert isinstance(used_up, grpc.RpcError) and used_up.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "used up" in (used_up.details() or ""), used_up.details()
    expiring = new_token(secured, "pool-x", "enroll", "--expires-in", "1h")
    secured.fetch("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'pool-x'")
    expired = enroll(secured, expiring, "enrolled-4")
    assert isinstance(expired, grpc.RpcError) and expired.code() == grpc.StatusCode.UNAUTHENTICATED
    assert not secured.fetch("SELECT 1 FROM api_tokens WHERE worker_id IN ('enrolled-3', 'enrolled-4')")


API_METHODS = [
    (f"/{service.full_name}/{method.name}", GetMessageClass(method.input_type))
    for service in (
        *api_pb2.DESCRIPTOR.services_by_name.values(),
        secrets_pb2.DESCRIPTOR.services_by_name["SecretsService"],
    )
    for method in service.methods
]


def test_an_enrollment_token_can_call_nothing_but_enroll(secured: Cluster) -> None:
    pool = new_token(secured, "pool-only", "enroll")
    tokens_before = secured.fetchval("SELECT count(*) FROM api_tokens")
    for method, request_class in API_METHODS:
        outcome = call(secured.api_address, method, request_class(), pool)
        assert isinstance(outcome, grpc.RpcError), method
        assert outcome.code() == grpc.StatusCode.PERMISSION_DENIED, (method, outcome.details())
    bundle = call(
        secured.registry_address,
        "/schedd.v1.WorkerRegistry/FetchBundle",
        worker_pb2.FetchBundleRequest(sha256="0" * 64),
        pool,
    )
    assert isinstance(bundle, grpc.RpcError) and bundle.code() == grpc.StatusCode.PERMISSION_DENIED
    stream = RawWorker(secured.registry_address, pool, "enroll-as-worker")
    try:
        ended = stream.outcome()
    finally:
        stream.close()
    assert isinstance(ended, grpc.RpcError) and ended.code() == grpc.StatusCode.PERMISSION_DENIED
    assert secured.fetchval("SELECT count(*) FROM api_tokens") == tokens_before
    worker = new_token(secured, "worker-no-enroll", "worker")
    refused = enroll(secured, worker, "w-by-worker-token")
    assert isinstance(refused, grpc.RpcError) and refused.code() == grpc.StatusCode.PERMISSION_DENIED


def test_the_log_cap_holds_against_forged_offsets(secured: Cluster, tmp_path: Path) -> None:
    spec = tmp_path / "chatty.json"
    spec.write_text(
        json.dumps(
            {"dag_id": "chatty", "tasks": [{"task_id": "t", "queue": "logcap", "shell": {"command": "true"}}]}
        )
    )
    assert admin(secured, "dags", "register", str(spec)).returncode == 0
    token = new_token(secured, "logger-1", "worker", "--worker-id", "logger-1")
    logger = RawWorker(secured.registry_address, token, "logger-1", queues=["logcap"])
    try:
        logger.next("welcome")
        logger.send(credit=worker_pb2.Credit(slots=1))
        run_id = trigger(secured, "chatty")
        attempt = running_attempt(secured, "chatty", run_id, "t")
        chunk = "x" * (256 * 1024)
        for _ in range(24):  # 6 MiB, every chunk claiming offset 0
            logger.send(log=worker_pb2.LogChunk(attempt=ref(attempt), offset=0, data=chunk))
        assert logger.finish() is None  # every chunk was handled when the stream ends
    finally:
        logger.close()
    stored = secured.fetchval(
        "SELECT coalesce(sum(octet_length(data)), 0) FROM task_logs WHERE attempt_id = $1::uuid",
        attempt["attempt_id"],
    )
    assert 0 < stored <= MAX_LOG_BYTES_PER_ATTEMPT


def test_a_worker_started_with_an_enrollment_token_runs_tasks_with_its_own_token(
    secured: Cluster, tmp_path: Path
) -> None:
    pool = new_token(secured, "pool-real", "enroll", "--max-uses", "1", "--queues", "enrolled-q")
    cache = tmp_path / "cache" / "worker-token.json"
    env = {
        "SCHEDD_WORKER_TOKEN": "",
        "SCHEDD_ENROLL_TOKEN": pool,
        "SCHEDD_WORKER_TOKEN_CACHE": str(cache),
        "SCHEDD_WORKER_QUEUES": "enrolled-q",
    }
    secured.add_worker("enrolled-real", env=env)
    issued = secured.fetch(
        "SELECT role, queues, created_by FROM api_tokens "
        "WHERE worker_id = 'enrolled-real' AND revoked_at IS NULL"
    )
    assert issued == [{"role": "worker", "queues": ["enrolled-q"], "created_by": "pool-real"}]
    assert cache.stat().st_mode & 0o777 == 0o600
    assert secured.stop_worker("enrolled-real") == 0
    # The enrollment token is used up: the restarted worker connects with its cached token.
    secured.add_worker("enrolled-real", env=env)
    spec = tmp_path / "enrolled.json"
    spec.write_text(
        json.dumps(
            {
                "dag_id": "enrolled",
                "tasks": [{"task_id": "t", "queue": "enrolled-q", "shell": {"command": "true"}}],
            }
        )
    )
    assert admin(secured, "dags", "register", str(spec)).returncode == 0
    run = admin(secured, "runs", "trigger", "enrolled", "--run-id", "r1", "--wait")
    assert run.returncode == 0, run.stdout + run.stderr
    assert secured.fetch(ATTEMPT, "enrolled", "r1", "t")[0]["worker_id"] == "enrolled-real"
    assert secured.stop_worker("enrolled-real") == 0
