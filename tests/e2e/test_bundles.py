"""Code bundles end to end, on a cluster with tokens required and one worker: a code change reaches
the next run without a worker restart while the run in flight finishes on the old code, in
processes that never mix versions; a module that fails to import fails its task at once with the
traceback; and bad uploads and fetches get the right status codes and change nothing."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from schedctl.bundles import PIECE_BYTES
from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb, worker_pb2, worker_pb2_grpc
from schedd_core.limits import MAX_ARCHIVE_BYTES
from schedd_devstack import LocalEtcd
from schedd_devstack.services import Cluster
from schedd_devstack.stack import make_base_dir
from schedd_exec.bundle_pack import pack
from tests.fixtures.services import cluster_on_own_database, schedctl
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

#: Liveness bound (seconds) for runs and markers: generous on purpose.
LIVENESS = 90.0
RPC_TIMEOUT = 30.0

WORK = """\
import json
import os
import time
from pathlib import Path

VERSION = "{version}"


def step(params, context):
    markers = Path(params["markers"])
    run = context["SCHEDD_RUN_ID"]
    record = {{"version": VERSION, "pid": os.getpid(), "worker_pid": os.getppid(), "run": run}}
    (markers / (record["run"] + ".json")).write_text(json.dumps(record))
    if params.get("block"):
        deadline = time.monotonic() + 120
        while not (markers / "release").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("never released")
            time.sleep(0.05)
    return record
"""

FLOW = """\
import work
from schedd_sdk import dag, task

step = task(task_id="step")(work.step)


@dag(dag_id="bundled", params={{"markers": {markers!r}, "block": False}})
def bundled():
    step()
"""


@pytest.fixture(scope="module")
def secured(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("bundles"),
        workers=1,
        worker_capacity=4,
        auth=True,
    ) as cluster:
        yield cluster


def ctl(cluster: Cluster, *args: str) -> Any:
    return schedctl(cluster.api_address, "--token", cluster.admin_token, *args)


def token(cluster: Cluster, name: str, role: str) -> str:
    result = ctl(cluster, "tokens", "create", name, "--role", role)
    assert result.returncode == 0, result.stderr
    return str(result.stdout.strip())


def run_state(cluster: Cluster, dag_id: str, run_id: str) -> str | None:
    rows = cluster.fetch("SELECT state FROM dag_runs WHERE dag_id = $1 AND run_id = $2", dag_id, run_id)
    return str(rows[0]["state"]) if rows else None


def task_row(cluster: Cluster, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    rows = cluster.fetch(
        "SELECT ti.state, ti.try_number, ti.worker_id, ti.result, ti.error FROM task_instances ti "
        "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.dag_id = $1 AND r.run_id = $2 AND ti.task_id = $3",
        dag_id,
        run_id,
        task_id,
    )
    assert rows, (dag_id, run_id, task_id)
    return rows[0]


def test_a_code_change_reaches_the_next_run_without_a_worker_restart(
    secured: Cluster, tmp_path: Path
) -> None:
    project, markers = tmp_path / "project", tmp_path / "markers"
    project.mkdir()
    markers.mkdir()
    (project / "work.py").write_text(WORK.format(version="v1"))
    (project / "flow.py").write_text(FLOW.format(markers=str(markers)))
    [(worker_id, worker)] = secured.workers.items()
    worker_pid = worker.pid
    incarnation = secured.fetchval("SELECT incarnation FROM workers")

    first = ctl(secured, "dags", "register", str(project / "flow.py"))
    assert first.returncode == 0, first.stderr
    assert "registered new version" in first.stdout and "uploaded" in first.stderr
    again = ctl(secured, "dags", "register", str(project / "flow.py"))
    assert "unchanged" in again.stdout and "already stored" in again.stderr, again.stdout + again.stderr

    started = ctl(secured, "runs", "trigger", "bundled", "--run-id", "r1", "--conf", '{"block": true}')
    assert started.returncode == 0, started.stderr
    wait_until("run 1 to start its task", lambda: (markers / "r1.json").exists(), LIVENESS, interval=0.1)

    # The task's code changes while run 1 runs: that alone makes a new version.
    (project / "work.py").write_text(WORK.format(version="v2"))
    second = ctl(secured, "dags", "register", str(project / "flow.py"))
    assert "registered new version" in second.stdout, second.stdout + second.stderr
    bundles = secured.fetch("SELECT sha256 FROM code_bundles")
    assert len(bundles) == 2

    done = ctl(secured, "runs", "trigger", "bundled", "--run-id", "r2", "--wait", "--wait-timeout", "90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert run_state(secured, "bundled", "r1") == "running", "run 1 should still be blocked"
    (markers / "release").write_text("")
    wait_until(
        "run 1 to finish",
        lambda: run_state(secured, "bundled", "r1") in ("success", "failed"),
        LIVENESS,
        interval=0.1,
    )
    third = ctl(secured, "runs", "trigger", "bundled", "--run-id", "r3", "--wait", "--wait-timeout", "90")
    assert third.returncode == 0, third.stdout + third.stderr

    records = {
        run: json.loads(task_row(secured, "bundled", run, "step")["result"]) for run in ("r1", "r2", "r3")
    }
    assert run_state(secured, "bundled", "r1") == "success"
    assert {run: r["version"] for run, r in records.items()} == {"r1": "v1", "r2": "v2", "r3": "v2"}
    # Not restarted: the same worker process ran every run, and its row kept its incarnation.
    assert {r["worker_pid"] for r in records.values()} == {worker_pid}
    assert worker.alive and worker.pid == worker_pid
    assert secured.fetchval("SELECT incarnation FROM workers") == incarnation
    assert {task_row(secured, "bundled", run, "step")["worker_id"] for run in records} == {worker_id}
    # Never two versions in one process.
    versions_by_pid: dict[int, set[str]] = {}
    for record in records.values():
        versions_by_pid.setdefault(record["pid"], set()).add(record["version"])
    assert all(len(v) == 1 for v in versions_by_pid.values()), versions_by_pid
    assert records["r1"]["pid"] != records["r2"]["pid"]


BROKEN_SPEC = """\
dag_id: broken_code
tasks:
  - task_id: import_fails
    retries: 3
    python: {target: "broken:run"}
  - task_id: function_missing
    retries: 3
    python: {target: "fine:no_such_function"}
"""


def test_an_import_error_fails_at_once_with_its_traceback(secured: Cluster, tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "broken.py").write_text(
        textwrap.dedent(
            """\
            import json


            def helper():
                raise RuntimeError("boom while importing broken")


            helper()
            """
        )
    )
    (code / "fine.py").write_text("def run():\n    return 1\n")
    spec = tmp_path / "broken.yaml"
    spec.write_text(BROKEN_SPEC)
    registered = ctl(secured, "dags", "register", str(spec), "--bundle", str(code))
    assert registered.returncode == 0, registered.stderr
    result = ctl(
        secured, "runs", "trigger", "broken_code", "--run-id", "r1", "--wait", "--wait-timeout", "90"
    )
    assert result.returncode == 1, result.stdout + result.stderr

    for task_id in ("import_fails", "function_missing"):
        row = task_row(secured, "broken_code", "r1", task_id)
        assert (row["state"], row["try_number"]) == ("failed", 1), row  # retries: 3, yet no retry
    shown = ctl(secured, "runs", "get", "broken_code/r1", "-o", "json")
    tasks = {t["task_id"]: t for t in json.loads(shown.stdout)["task_instances"]}
    error = tasks["import_fails"]["error"]
    assert "RuntimeError: boom while importing broken" in error
    assert 'broken.py", line 5, in helper' in error  # the traceback, down to the raising line
    assert "cannot find 'no_such_function' in module 'fine'" in tasks["function_missing"]["error"]
    logs = ctl(secured, "tasks", "logs", "broken_code/r1", "import_fails")
    assert "boom while importing broken" in logs.stderr and 'broken.py", line 5' in logs.stderr, logs.stderr


def _code(exc: grpc.RpcError) -> grpc.StatusCode:
    return exc.code()


def test_bad_uploads_and_fetches_get_the_right_status(secured: Cluster, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mod.py").write_text("X = 1\n")
    packed = pack(tmp_path / "src")
    admin = (("authorization", f"Bearer {secured.admin_token}"),)
    worker = (("authorization", f"Bearer {secured.worker_token}"),)
    viewer = (("authorization", f"Bearer {token(secured, 'bundle-viewer', 'viewer')}"),)
    before = secured.fetchval("SELECT count(*) FROM code_bundles")

    with grpc.insecure_channel(secured.api_address) as channel:
        stub = api_pb2_grpc.BundleServiceStub(channel)

        def upload(archive: bytes, sha256: str, metadata: Any = admin) -> Any:
            pieces = [archive[i : i + PIECE_BYTES] for i in range(0, len(archive), PIECE_BYTES)]
            requests = [api_pb2.UploadBundleRequest(archive=piece, sha256=sha256) for piece in pieces]
            return stub.UploadBundle(iter(requests), metadata=metadata, timeout=RPC_TIMEOUT)

        for archive, sha256, field in [
            (b"\0" * (MAX_ARCHIVE_BYTES + 1), packed.sha256, "archive: is more than 16777216 bytes"),
            (packed.archive, "0" * 64, "sha256: is 000"),
            (packed.archive, "not-a-hash", "sha256: must be a SHA-256"),
            (b"not a tar archive" * 64, packed.sha256, "archive: is not a tar archive"),
        ]:
            with pytest.raises(grpc.RpcError) as bad:
                upload(archive, sha256)
            assert _code(bad.value) == grpc.StatusCode.INVALID_ARGUMENT, bad.value
            assert field in (bad.value.details() or ""), bad.value.details()
        for metadata in (worker, viewer):
            with pytest.raises(grpc.RpcError) as denied:
                upload(packed.archive, packed.sha256, metadata)
            assert _code(denied.value) == grpc.StatusCode.PERMISSION_DENIED
        assert secured.fetchval("SELECT count(*) FROM code_bundles") == before

        assert upload(packed.archive, packed.sha256).created
        assert not upload(packed.archive, packed.sha256).created  # already stored: not an error

        dags = api_pb2_grpc.DagServiceStub(channel)
        spec = pb.DagSpec(
            dag_id="unknown_bundle",
            tasks=[pb.TaskSpec(task_id="t", python=pb.PythonCallable(target="mod:f"))],
            code_bundle="f" * 64,
        )
        with pytest.raises(grpc.RpcError) as missing:
            dags.RegisterDag(api_pb2.RegisterDagRequest(spec=spec), metadata=admin, timeout=RPC_TIMEOUT)
        assert _code(missing.value) == grpc.StatusCode.FAILED_PRECONDITION
        assert "spec.code_bundle" in (missing.value.details() or "")
        assert secured.fetchval("SELECT count(*) FROM dags WHERE dag_id = 'unknown_bundle'") == 0

    registry = next(iter(secured.registries))
    with grpc.insecure_channel(registry) as channel:
        fetch = worker_pb2_grpc.WorkerRegistryStub(channel).FetchBundle

        def fetched(sha256: str, metadata: Any = worker) -> bytes:
            chunks = fetch(
                worker_pb2.FetchBundleRequest(sha256=sha256), metadata=metadata, timeout=RPC_TIMEOUT
            )
            return b"".join(c.data for c in chunks)

        assert fetched(packed.sha256) == packed.archive
        refusals: list[tuple[str, Any, grpc.StatusCode]] = [
            ("e" * 64, worker, grpc.StatusCode.NOT_FOUND),
            ("E" * 64, worker, grpc.StatusCode.INVALID_ARGUMENT),
            (packed.sha256, admin, grpc.StatusCode.PERMISSION_DENIED),
            (packed.sha256, (), grpc.StatusCode.UNAUTHENTICATED),
        ]
        for sha256, metadata, status in refusals:
            with pytest.raises(grpc.RpcError) as refused:
                fetched(sha256, metadata)
            assert _code(refused.value) == status, (sha256, refused.value)


def test_an_oversized_bundle_is_refused_by_schedctl(secured: Cluster, tmp_path: Path) -> None:
    code = tmp_path / "heavy"
    code.mkdir()
    (code / "data.bin").write_bytes(os.urandom(MAX_ARCHIVE_BYTES + 1))
    spec = tmp_path / "heavy.yaml"
    spec.write_text("dag_id: heavy\ntasks:\n  - task_id: t\n    python: {target: 'mod:run'}\n")
    result = ctl(secured, "dags", "register", str(spec), "--bundle", str(code))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "a bundle may be at most 16777216 bytes" in result.stderr and "data.bin" in result.stderr
    assert secured.fetchval("SELECT count(*) FROM dags WHERE dag_id = 'heavy'") == 0


def test_a_local_executor_runs_a_bundle_read_from_the_database(
    fresh_database_url: str, tmp_path: Path
) -> None:
    """A scheduler running tasks itself (no registry) fetches bundles from PostgreSQL. On an etcd of
    its own: the module's cluster keeps leading on the shared one."""
    project, markers = tmp_path / "project", tmp_path / "markers"
    project.mkdir()
    markers.mkdir()
    (project / "work.py").write_text(WORK.format(version="local-v1"))
    (project / "flow.py").write_text(FLOW.format(markers=str(markers)))
    etcd, base_dir = LocalEtcd(), make_base_dir("schedd-test-etcd-")
    etcd.start(base_dir, durable=False)
    cluster = Cluster(
        fresh_database_url,
        etcd.endpoint,
        tmp_path / "logs",
        registries=0,
        workers=0,
        scheduler_env={"SCHEDD_EXECUTOR": "local"},
    )
    try:
        cluster.start()
        registered = schedctl(cluster.api_address, "dags", "register", str(project / "flow.py"))
        assert registered.returncode == 0, registered.stderr
        done = schedctl(
            cluster.api_address,
            "runs",
            "trigger",
            "bundled",
            "--run-id",
            "r1",
            "--wait",
            "--wait-timeout",
            "90",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(task_row(cluster, "bundled", "r1", "step")["result"])["version"] == "local-v1"
    finally:
        cluster.stop()
        cluster.release_election()
        etcd.stop()
        shutil.rmtree(base_dir, ignore_errors=True)
