"""Read-only RPCs for looking back: the files of the code bundle a DAG version pins
(``DagService.ListDagVersionFiles``) and every attempt of a run (``RunService.ListTaskAttempts``).

They are mixins of the servicers in ``schedd_api.servicer`` (which hold the engine). Both need the
viewer role (``schedd_auth.roles``) and change nothing.

Guaranteed for the files: the bundle is read from the store and checked as a bundle archive before
any file is listed; only regular files are listed, sorted by path; contents are at most
:data:`MAX_FILE_CONTENT_BYTES` of each file and :data:`MAX_CONTENT_BYTES` in all (a file cut short
or left out says so), so an answer stays well under the servers' message limit. Not guaranteed:
that the contents are text (they are bytes, as stored).
"""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

import grpc

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.bundle_archive import check_archive
from schedd_core.errors import InvalidArgument, NotFound, quote
from schedd_rpc import convert, names
from schedd_store import attempts, bundles, dags as dag_store
from schedd_store.database import Engine

MAX_FILE_CONTENT_BYTES = 256 * 1024
MAX_CONTENT_BYTES = 2 * 1024 * 1024
MAX_PATH_CHARS = 1024


def _check_path(path: str) -> str:
    """The path asked for, or InvalidArgument naming ``path`` unless it is a normalised relative one."""
    if len(path) > MAX_PATH_CHARS:
        raise InvalidArgument("path", f"is {len(path)} characters; at most {MAX_PATH_CHARS}")
    parts = PurePosixPath(path).parts
    if path.startswith("/") or ".." in parts or not parts or PurePosixPath(*parts).as_posix() != path:
        raise InvalidArgument("path", f"{quote(path)} is not a normalised relative path of a bundle")
    return path


async def version_files(
    engine: Engine, request: api_pb2.ListDagVersionFilesRequest
) -> api_pb2.ListDagVersionFilesResponse:
    """The answer of ``ListDagVersionFiles`` (see the module and the proto)."""
    dag_id, version_hash = names.parse_version_name(request.name)
    wanted = _check_path(request.path) if request.path else ""
    version = await dag_store.get_version(engine, dag_id, version_hash)
    sha256 = version.spec.code_bundle if version.spec is not None else ""
    answer = api_pb2.ListDagVersionFilesResponse(code_bundle=sha256)
    if not sha256:
        if wanted:
            raise NotFound(f"version {quote(version_hash)} of dag {quote(dag_id)} has no code bundle")
        return answer
    _, pieces = await bundles.read_bundle(engine, sha256)
    archive = b"".join([piece async for piece in pieces])
    members = sorted((m for m in check_archive(archive, "code_bundle") if m.isreg()), key=lambda m: m.name)
    if wanted:
        members = [m for m in members if m.name == wanted]
        if not members:
            raise NotFound(f"path {quote(wanted)} is not a file of bundle {sha256}")
    budget = MAX_CONTENT_BYTES
    for member in members:
        data = archive[member.offset_data : member.offset_data + member.size]
        file = pb_file(member.name, data)
        if request.include_content:
            take = min(len(data), MAX_FILE_CONTENT_BYTES, budget)
            file.content = data[:take]
            file.content_truncated = take < len(data)
            budget -= take
        answer.files.append(file)
    return answer


def pb_file(path: str, data: bytes) -> api_pb2.BundleFile:
    return api_pb2.BundleFile(path=path, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest())


def _attempt(record: attempts.AttemptRecord) -> api_pb2.TaskAttempt:
    return api_pb2.TaskAttempt(
        task_id=record.task_id,
        map_index=record.map_index,
        try_number=record.try_number,
        worker_id=record.worker_id,
        state=pb.TaskState.Value("TASK_STATE_" + record.state.upper()),
        claim_time=convert.ts(record.claimed_at),
        start_time=convert.ts(record.started_at),
        end_time=convert.ts(record.ended_at),
        exit_code=record.exit_code or 0,
        error=record.error or "",
    )


class VersionFilesMixin:
    """``DagService.ListDagVersionFiles`` for a servicer with an ``_engine``."""

    _engine: Engine

    async def ListDagVersionFiles(
        self, request: api_pb2.ListDagVersionFilesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListDagVersionFilesResponse:
        return await version_files(self._engine, request)


class AttemptsMixin:
    """``RunService.ListTaskAttempts`` for a servicer with an ``_engine``."""

    _engine: Engine

    async def ListTaskAttempts(
        self, request: api_pb2.ListTaskAttemptsRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListTaskAttemptsResponse:
        dag_id, run_id = names.parse_run_name(request.parent, "parent")
        records, more = await attempts.list_attempts(engine=self._engine, dag_id=dag_id, run_id=run_id)
        return api_pb2.ListTaskAttemptsResponse(attempts=[_attempt(r) for r in records], truncated=more)
