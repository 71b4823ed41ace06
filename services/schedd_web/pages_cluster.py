"""The cluster page: which scheduler leads (and its fencing token), the standbys, the workers with
their load and last heartbeat, the pools with their use, and the api's version."""

from __future__ import annotations

import asyncio

from aiohttp import web

from schedd.v1 import api_pb2
from schedd_web.base import API, render
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Workers listed at most.
MAX_WORKERS = 500


@routes.get("/cluster")
async def cluster_page(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    token = session.token
    leader, workers, pools, version = await asyncio.gather(
        api.call(api.cluster.GetLeader, api_pb2.GetLeaderRequest(), token),
        api.call(api.workers.ListWorkers, api_pb2.ListWorkersRequest(page_size=MAX_WORKERS), token),
        api.call(api.pools.ListPools, api_pb2.ListPoolsRequest(), token),
        api.call(api.cluster.GetVersion, api_pb2.GetVersionRequest(), token),
    )
    return render(
        request,
        "cluster.html",
        leader=leader,
        workers=list(workers.workers),
        more_workers=bool(workers.next_page_token),
        pools=list(pools.pools),
        version=version,
    )
