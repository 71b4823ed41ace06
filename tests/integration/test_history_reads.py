"""The api's read-only history RPCs against the real store: the files of the code bundle a DAG
version pins (``ListDagVersionFiles``: listed by path with size and hash, contents within the
limits, bad input INVALID_ARGUMENT naming the field, missing things NOT_FOUND) and every attempt of
a run (``ListTaskAttempts``: earlier tries included, in order). Both are viewer reads.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_api import history
from schedd_api.servicer import DagServicer, RunServicer
from schedd_auth import roles
from schedd_core.clock import SystemClock
from schedd_core.errors import InvalidArgument, NotFound
from schedd_store import bundles, dags
from schedd_store.database import Engine
from schedd_store.named_sql import Statement
from tests.bundles import bundle_archive

from .helpers import registered_run, spec

pytestmark = pytest.mark.integration

BIG = b"x" * (history.MAX_FILE_CONTENT_BYTES + 10)


async def _bundled_version(engine: Engine) -> tuple[str, str]:
    """A DAG ``coded`` with a version pinning a bundle of two files; (version name, bundle hash)."""
    archive = bundle_archive({"flow/work.py": b"def step():\n    return 1\n", "flow/big.txt": BIG})
    sha256 = hashlib.sha256(archive).hexdigest()
    await bundles.put_bundle(engine, sha256, archive)
    dag = spec("coded", {"t": []})
    dag.code_bundle = sha256
    done = await dags.register_dag(engine, dag)
    return f"dags/coded/versions/{done.dag.version_hash}", sha256


async def test_a_versions_bundle_files_are_listed_and_read_within_limits(engine: Engine) -> None:
    name, sha256 = await _bundled_version(engine)
    servicer = DagServicer(engine, SystemClock())
    listed = await servicer.ListDagVersionFiles(api_pb2.ListDagVersionFilesRequest(name=name), None)
    assert listed.code_bundle == sha256
    assert [(f.path, f.size_bytes) for f in listed.files] == [
        ("flow/big.txt", len(BIG)),
        ("flow/work.py", 25),
    ]
    assert all(not f.content for f in listed.files)
    assert listed.files[1].sha256 == hashlib.sha256(b"def step():\n    return 1\n").hexdigest()

    read = await servicer.ListDagVersionFiles(
        api_pb2.ListDagVersionFilesRequest(name=name, include_content=True), None
    )
    big, work = read.files
    assert work.content == b"def step():\n    return 1\n" and not work.content_truncated
    assert len(big.content) == history.MAX_FILE_CONTENT_BYTES and big.content_truncated

    one = await servicer.ListDagVersionFiles(
        api_pb2.ListDagVersionFilesRequest(name=name, path="flow/work.py", include_content=True), None
    )
    assert [f.path for f in one.files] == ["flow/work.py"]


async def test_a_version_without_a_bundle_has_no_files(engine: Engine) -> None:
    done = await dags.register_dag(engine, spec("plain", {"t": []}))
    servicer = DagServicer(engine, SystemClock())
    name = f"dags/plain/versions/{done.dag.version_hash}"
    listed = await servicer.ListDagVersionFiles(api_pb2.ListDagVersionFilesRequest(name=name), None)
    assert listed.code_bundle == "" and not listed.files
    with pytest.raises(NotFound):
        await servicer.ListDagVersionFiles(api_pb2.ListDagVersionFilesRequest(name=name, path="a.py"), None)


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"name": "dags/coded"}, "name"),
        ({"name": "dags/coded/versions/not-a-hash!"}, "name"),
        ({"path": "../etc/passwd"}, "path"),
        ({"path": "/flow/work.py"}, "path"),
        ({"path": "flow//work.py"}, "path"),
        ({"path": "a" * (history.MAX_PATH_CHARS + 1)}, "path"),
    ],
)
async def test_bad_input_names_its_field(engine: Engine, request_fields: dict[str, Any], field: str) -> None:
    name, _ = await _bundled_version(engine)
    servicer = DagServicer(engine, SystemClock())
    request = api_pb2.ListDagVersionFilesRequest(name=name)
    for key, value in request_fields.items():
        setattr(request, key, value)
    with pytest.raises(InvalidArgument) as caught:
        await servicer.ListDagVersionFiles(request, None)
    assert caught.value.field == field


async def test_missing_versions_and_paths_are_not_found(engine: Engine) -> None:
    name, _ = await _bundled_version(engine)
    servicer = DagServicer(engine, SystemClock())
    with pytest.raises(NotFound, match="not a file of bundle"):
        await servicer.ListDagVersionFiles(
            api_pb2.ListDagVersionFilesRequest(name=name, path="flow/nope.py"), None
        )
    with pytest.raises(NotFound):
        await servicer.ListDagVersionFiles(
            api_pb2.ListDagVersionFilesRequest(name="dags/coded/versions/" + "0" * 64), None
        )


async def _sql(engine: Engine, statement: str, **params: Any) -> list[Any]:
    async with engine.begin() as conn:
        result = await conn.execute(Statement(statement), params)
        return result.all()


async def test_every_attempt_of_a_run_is_listed_in_order(engine: Engine) -> None:
    run = await registered_run(engine, spec("retried", {"a": [], "b": ["a"]}))
    for task_id, tries in (("a", [("failed", "boom"), ("success", None)]), ("b", [("running", None)])):
        [ti] = await _sql(
            engine,
            "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, map_index, state, "
            "try_number, max_tries) "
            "SELECT r.id, r.dag_id, r.logical_date, :task_id, -1, 'running', :tries, 3 "
            "FROM dag_runs r WHERE r.id = :run_pk RETURNING id",
            run_pk=run.pk,
            task_id=task_id,
            tries=len(tries),
        )
        for number, (state, error) in reversed(list(enumerate(tries, start=1))):
            await _sql(
                engine,
                "INSERT INTO task_attempts (attempt_id, ti_id, try_number, worker_id, state, started_at, "
                "ended_at, error) VALUES (gen_random_uuid(), :ti, :n, 'w1', :state, "
                "now() - make_interval(secs => 60 - 10 * :n), "
                "CASE WHEN :state = 'running' THEN NULL "
                "ELSE now() - make_interval(secs => 55 - 10 * :n) END, "
                ":error)",
                ti=ti.id,
                n=number,
                state=state,
                error=error,
            )
    servicer = RunServicer(engine, SystemClock())
    listed = await servicer.ListTaskAttempts(
        api_pb2.ListTaskAttemptsRequest(parent="dags/retried/runs/r1"), None
    )
    assert [(a.task_id, a.try_number, a.state) for a in listed.attempts] == [
        ("a", 1, pb.TASK_STATE_FAILED),
        ("a", 2, pb.TASK_STATE_SUCCESS),
        ("b", 1, pb.TASK_STATE_RUNNING),
    ]
    first, _, running = listed.attempts
    assert first.error == "boom" and first.map_index == -1 and first.worker_id == "w1"
    assert first.end_time.ToDatetime() > first.start_time.ToDatetime()
    assert running.HasField("start_time") and not running.HasField("end_time")
    assert not listed.truncated

    with pytest.raises(InvalidArgument) as caught:
        await servicer.ListTaskAttempts(api_pb2.ListTaskAttemptsRequest(parent="dags/retried"), None)
    assert caught.value.field == "parent"
    with pytest.raises(NotFound):
        await servicer.ListTaskAttempts(
            api_pb2.ListTaskAttemptsRequest(parent="dags/retried/runs/nope"), None
        )


def test_both_are_viewer_reads_and_not_audited() -> None:
    for method in ("/schedd.v1.DagService/ListDagVersionFiles", "/schedd.v1.RunService/ListTaskAttempts"):
        access = roles.METHODS[method]
        assert (access.role, access.audited) == (roles.VIEWER, False)
