"""The cluster page: which scheduler leads (and its fencing token), the standbys, the workers with
their load and last heartbeat, the pools with their use and the demand waiting for them, and the
api's version; and its changes: drain a worker, create or resize a pool, delete a pool.

Each change is offered to admins only (the api gives ``DrainWorker``, ``SetPool`` and
``DeletePool`` to the admin role) and goes through a confirmation page that says what it changes;
the confirmation posts with the session's CSRF token. The web service does not check the role of a
change itself: whoever posts, the api decides, and its refusal is the page shown (403 with the api's
message). Not guaranteed: the numbers on a confirmation page still hold when it is posted (a pool's
use, a worker's running attempts change meanwhile).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from aiohttp import web

from schedd.v1 import api_pb2
from schedd_web import pools_form
from schedd_web.base import API, render
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Workers listed at most.
MAX_WORKERS = 500
#: What a change reports back to the cluster page (``?done=``).
DONE = {"drain": "Asked {} to drain.", "pool": "Saved pool {}.", "delete": "Deleted pool {}."}


@routes.get("/cluster")
async def cluster_page(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    token = session.token
    leader, workers, pools, version = await asyncio.gather(
        api.call(api.cluster.GetLeader, api_pb2.GetLeaderRequest(), token),
        api.call(
            api.workers.ListWorkers,
            api_pb2.ListWorkersRequest(page_size=MAX_WORKERS, include_gone=True),
            token,
        ),
        api.call(api.pools.ListPools, api_pb2.ListPoolsRequest(), token),
        api.call(api.cluster.GetVersion, api_pb2.GetVersionRequest(), token),
    )
    listed = list(workers.workers)
    # Connected workers first; the ones that left after them, newest first within each.
    shown = [w for w in listed if w.state != "gone"] + [w for w in listed if w.state == "gone"][:20]
    pool_list = list(pools.pools)
    return render(
        request,
        "cluster.html",
        leader=leader,
        workers=shown,
        more_workers=bool(workers.next_page_token),
        pools=pool_list,
        demand=pools_form.demand(pool_list, [w for w in listed if w.state != "gone"]),
        version=version,
        done=_done(request.query),
    )


def _done(query: Mapping[str, str]) -> str:
    template = DONE.get(query.get("done", ""))
    return template.format(query.get("what", "")) if template else ""


# -- drain a worker ----------------------------------------------------------------------------------


async def _worker(request: web.Request, token: str) -> api_pb2.Worker:
    api = request.app[API]
    worker_id = request.match_info["worker_id"]
    listed = await api.call(api.workers.ListWorkers, api_pb2.ListWorkersRequest(page_size=MAX_WORKERS), token)
    for worker in listed.workers:
        if worker.worker_id == worker_id:
            found: api_pb2.Worker = worker
            return found
    raise web.HTTPNotFound(text=f"worker: {worker_id!r} is not connected")


@routes.get("/cluster/workers/{worker_id}/drain")
async def drain_confirm(request: web.Request) -> web.Response:
    session = require_session(request)
    worker = await _worker(request, session.token)
    return render(request, "confirm_drain.html", worker=worker)


@routes.post("/cluster/workers/{worker_id}/drain")
async def drain(request: web.Request) -> web.Response:
    """``DrainWorker`` as the session's user: the worker stops taking work, finishes what it runs and
    exits. A role the api refuses gets the api's refusal."""
    session = require_session(request)
    api = request.app[API]
    worker_id = request.match_info["worker_id"]
    name = f"workers/{worker_id}"
    await api.call(api.workers.DrainWorker, api_pb2.DrainWorkerRequest(name=name), session.token)
    raise web.HTTPSeeOther(f"/cluster?done=drain&what={pools_form.quoted(worker_id)}")


# -- pools -------------------------------------------------------------------------------------------


async def _pools(request: web.Request, token: str) -> dict[str, api_pb2.Pool]:
    api = request.app[API]
    listed = await api.call(api.pools.ListPools, api_pb2.ListPoolsRequest(), token)
    return {p.pool: p for p in listed.pools}


@routes.get("/cluster/pools/new")
async def new_pool(request: web.Request) -> web.Response:
    require_session(request)
    return render(request, "pool_form.html", form=pools_form.PoolForm.blank(), existing=None)


@routes.get("/cluster/pools/{pool}/edit")
async def edit_pool(request: web.Request) -> web.Response:
    session = require_session(request)
    pool = (await _pools(request, session.token)).get(request.match_info["pool"])
    if pool is None:
        raise web.HTTPNotFound(text=f"pool: {request.match_info['pool']!r} does not exist")
    return render(request, "pool_form.html", form=pools_form.PoolForm.of(pool), existing=pool)


@routes.get("/cluster/pools/confirm")
async def pool_confirm(request: web.Request) -> web.Response:
    """The pool form's values read and checked, and what saving them changes; the form again, with
    the problems at their fields, when a value cannot be read."""
    session = require_session(request)
    form = pools_form.PoolForm.read(request.query)
    existing = (await _pools(request, session.token)).get(form.pool)
    if form.errors:
        return render(request, "pool_form.html", status=400, form=form, existing=existing)
    return render(request, "confirm_pool.html", form=form, existing=existing)


@routes.post("/cluster/pools")
async def set_pool(request: web.Request) -> web.Response:
    """``SetPool`` as the session's user; the api's field errors are shown at the form's fields."""
    session = require_session(request)
    form = pools_form.PoolForm.read(await request.post())
    if form.errors:
        return render(request, "pool_form.html", status=400, form=form, existing=None)
    saved = await pools_form.save(request.app[API], form, session.token)
    if saved is not None:  # the api named a field: show the form again with its words
        return render(request, "pool_form.html", status=400, form=saved, existing=None)
    raise web.HTTPSeeOther(f"/cluster?done=pool&what={pools_form.quoted(form.pool)}")


@routes.get("/cluster/pools/{pool}/delete")
async def delete_pool_confirm(request: web.Request) -> web.Response:
    session = require_session(request)
    pool = (await _pools(request, session.token)).get(request.match_info["pool"])
    if pool is None:
        raise web.HTTPNotFound(text=f"pool: {request.match_info['pool']!r} does not exist")
    return render(request, "confirm_pool_delete.html", pool=pool, request_id=pools_form.new_request_id())


@routes.post("/cluster/pools/{pool}/delete")
async def delete_pool(request: web.Request) -> web.Response:
    """``DeletePool``: the api refuses default_pool and a pool in use, with its reason."""
    session = require_session(request)
    form = await request.post()
    api = request.app[API]
    pool = request.match_info["pool"]
    delete = api_pb2.DeletePoolRequest(name=f"pools/{pool}", request_id=str(form.get("request_id", "")))
    await api.call(api.pools.DeletePool, delete, session.token)
    raise web.HTTPSeeOther(f"/cluster?done=delete&what={pools_form.quoted(pool)}")
