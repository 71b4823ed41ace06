"""The assets page: every asset with its lineage (the tasks that update it, the DAGs scheduled on
it, the tasks that read it) and its last event; and one asset's latest events, each with where it
came from and the runs that consumed it. Read-only: the api's viewer role suffices. Everything
shown is text from the api, escaped by the templates (a URI or an extra is data, never markup)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from schedd.v1 import assets_pb2 as apb
from schedd_web.base import API, render
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Assets and events listed at most.
LISTED = 200
EVENTS = 50


@routes.get("/assets")
async def assets_page(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    prefix = request.query.get("prefix", "")
    listed = await api.call(
        api.assets.ListAssets, apb.ListAssetsRequest(uri_prefix=prefix, page_size=LISTED), session.token
    )
    return render(
        request, "assets.html", assets=list(listed.assets), prefix=prefix, more=bool(listed.next_page_token)
    )


@routes.get("/assets/events")
async def asset_events_page(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    uri = request.query.get("uri", "")
    events, assets = await asyncio.gather(
        api.call(
            api.assets.ListAssetEvents, apb.ListAssetEventsRequest(uri=uri, page_size=EVENTS), session.token
        ),
        api.call(api.assets.ListAssets, apb.ListAssetsRequest(uri_prefix=uri, page_size=1), session.token),
    )
    asset = next((a for a in assets.assets if a.uri == uri), None)
    return render(request, "asset_events.html", uri=uri, asset=asset, events=list(events.events))
