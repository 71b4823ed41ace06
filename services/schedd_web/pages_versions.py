"""A DAG's versions (``/dags/{dag}/versions``: newest first, the current one marked, two of them to
pick) and the diff of any two (``/dags/{dag}/versions/diff?a=HASH&b=HASH``): their specs as sorted
JSON and the files of their code bundles (``ListDagVersionFiles``), each as a unified diff shown as
escaped text.

Guaranteed: both versions are read with the viewer's token; a hash that is not a version of the DAG
is the api's NOT_FOUND (or INVALID_ARGUMENT) page; a missing ``a`` or ``b`` is a 400 naming it.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import version_diff
from schedd_web.base import API, render
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Versions listed at most.
MAX_VERSIONS = 500


async def list_versions(request: web.Request, dag_id: str, token: str) -> list[pb.DagVersion]:
    """The DAG's versions, newest first, at most MAX_VERSIONS."""
    api = request.app[API]
    found: list[pb.DagVersion] = []
    page_token = ""
    while len(found) < MAX_VERSIONS:
        listing = api_pb2.ListDagVersionsRequest(
            parent=f"dags/{dag_id}", page_size=100, page_token=page_token
        )
        page = await api.call(api.dags.ListDagVersions, listing, token)
        found.extend(page.versions)
        page_token = page.next_page_token
        if not page_token:
            break
    return found[:MAX_VERSIONS]


@routes.get("/dags/{dag_id}/versions")
async def versions_page(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    dag_id = request.match_info["dag_id"]
    dag, versions = await asyncio.gather(
        api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"), session.token),
        list_versions(request, dag_id, session.token),
    )
    older = versions[1].version_hash if len(versions) > 1 else ""
    newer = versions[0].version_hash if versions else ""
    return render(request, "versions.html", dag=dag, versions=versions, older=older, newer=newer)


def _hash(request: web.Request, field: str) -> str:
    value = request.query.get(field, "").strip()
    if not value:
        raise web.HTTPBadRequest(text=f"{field}: pick a version (its hash) to compare")
    return value


async def _read(
    request: web.Request, dag_id: str, version_hash: str, token: str
) -> tuple[pb.DagVersion, api_pb2.ListDagVersionFilesResponse]:
    api = request.app[API]
    name = f"dags/{dag_id}/versions/{version_hash}"
    version, files = await asyncio.gather(
        api.call(api.dags.GetDagVersion, api_pb2.GetDagVersionRequest(name=name), token),
        api.call(
            api.dags.ListDagVersionFiles,
            api_pb2.ListDagVersionFilesRequest(name=name, include_content=True),
            token,
        ),
    )
    return version, files


@routes.get("/dags/{dag_id}/versions/diff")
async def diff_page(request: web.Request) -> web.Response:
    session = require_session(request)
    dag_id = request.match_info["dag_id"]
    a, b = _hash(request, "a"), _hash(request, "b")
    (old, old_files), (new, new_files) = await asyncio.gather(
        _read(request, dag_id, a, session.token), _read(request, dag_id, b, session.token)
    )
    old_name, new_name = f"a/{old.version_hash[:12]}", f"b/{new.version_hash[:12]}"
    spec_lines, spec_cut = version_diff.unified(
        version_diff.spec_text(old.spec),
        version_diff.spec_text(new.spec),
        f"{old_name}/spec.json",
        f"{new_name}/spec.json",
    )
    files, same = version_diff.file_diffs(list(old_files.files), list(new_files.files), old_name, new_name)
    return render(
        request,
        "versions_diff.html",
        dag_id=dag_id,
        old=old,
        new=new,
        old_bundle=old_files.code_bundle,
        new_bundle=new_files.code_bundle,
        spec_lines=spec_lines,
        spec_cut=spec_cut,
        max_lines=version_diff.MAX_DIFF_LINES,
        files=files,
        same=same,
    )
