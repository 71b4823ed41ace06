"""A DAG's grid page, kept live by the shared run watches of its unfinished runs and, on its newest
page, by the shared feed of the DAG's new runs (:mod:`schedd_web.runs_feed`); and its graph."""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import unquote

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import grid, grid_pages, present, run_history, shapes
from schedd_web.base import API, HUB, render, render_text
from schedd_web.live import FINAL_RUN_STATES, wait_any
from schedd_web.pages_dags import recent_runs, schedule_text
from schedd_web.runs_feed import FEED
from schedd_web.security import require_session
from schedd_web.sse import KEEPALIVE_SECONDS, MAX_STREAM_SECONDS, EventStream

routes = web.RouteTableDef()


async def _load(
    request: web.Request, token: str, page: grid_pages.GridPage
) -> tuple[pb.Dag, list[pb.DagRun], bool]:
    """The DAG, the page's runs (newest first, with their task instances) and whether older runs
    exist."""
    api = request.app[API]
    dag_id = request.match_info["dag_id"]

    async def runs() -> tuple[list[pb.DagRun], bool]:
        listed, more = await grid_pages.list_page(api, dag_id, token, page)
        # A listing carries no task instances: each run is read with them.
        reads = [api.call(api.runs.GetRun, api_pb2.GetRunRequest(name=r.name), token) for r in listed]
        return list(await asyncio.gather(*reads)), more

    dag, (read, more) = await asyncio.gather(
        api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"), token), runs()
    )
    return dag, read, more


def _fragment(request: web.Request, dag: pb.Dag, runs: list[pb.DagRun]) -> str:
    columns, rows = grid.build(dag.spec, runs)
    return render_text(request, "_grid.html", dag=dag, columns=columns, rows=rows)


@routes.get("/dags/{dag_id}/grid")
async def grid_page(request: web.Request) -> web.Response:
    session = require_session(request)
    page = grid_pages.GridPage.read(request.query)
    dag, runs, more = await _load(request, session.token, page)
    live = page.newest or any(r.state not in FINAL_RUN_STATES for r in runs)
    known = present.path_part(runs[0].run_id) if runs and page.newest else ""
    events = f"/dags/{present.path_part(dag.dag_id)}/grid/events{page.query()}"
    separator = "&" if "?" in events else "?"
    return render(
        request,
        "grid.html",
        dag=dag,
        schedule=schedule_text(dag.spec),
        fragment=_fragment(request, dag, runs),
        live=live,
        events=f"{events}{separator}known={known}" if page.newest else events,
        page=page,
        more=more,
        estimate=await run_history.newest_estimate(request, runs, session.token),
    )


@routes.get("/dags/{dag_id}/grid/events")
async def grid_events(request: web.Request) -> web.StreamResponse:
    """The grid fragment, rendered again each time one of its unfinished runs changes and, on the
    newest page, each time a newer run than the page knows appears (``?known=`` the newest run id
    of the loaded page; a reconnecting browser sends the last one it got as its event id). An older
    page's stream ends (event ``end``) once none of its runs is unfinished."""
    session = require_session(request)
    page = grid_pages.GridPage.read(request.query)
    dag, runs, _ = await _load(request, session.token, page)
    known = unquote(request.headers.get("Last-Event-ID") or request.query.get("known", ""))
    deadline = time.monotonic() + MAX_STREAM_SECONDS
    async with EventStream(request) as stream:
        while await _follow(request, stream, dag, runs, page, known, deadline):
            dag, runs, _ = await _load(request, session.token, page)
            known = runs[0].run_id if runs else ""
            await _send(request, stream, dag, runs)
    return stream.response


async def _send(request: web.Request, stream: EventStream, dag: pb.Dag, runs: list[pb.DagRun]) -> None:
    newest = present.path_part(runs[0].run_id) if runs else ""
    await stream.send("grid", _fragment(request, dag, runs), event_id=newest)


async def _follow(
    request: web.Request,
    stream: EventStream,
    dag: pb.Dag,
    runs: list[pb.DagRun],
    page: grid_pages.GridPage,
    known: str,
    deadline: float,
) -> bool:
    """Send the grid at each change of its unfinished runs until the deadline; True when a newer
    run appeared (the caller loads the page again and follows that)."""
    token = require_session(request).token
    by_name = {r.name: r for r in runs}
    async with contextlib.AsyncExitStack() as stack:
        subs = [
            await stack.enter_async_context(request.app[HUB].subscribe(r.name, token))
            for r in runs
            if r.state not in FINAL_RUN_STATES
        ]
        follower = None
        if page.newest:
            follower = await stack.enter_async_context(request.app[FEED].follow(dag.dag_id, token, known))
        while (subs or follower) and time.monotonic() < deadline:
            await _first_of([s.changed for s in subs] + ([follower.changed] if follower else []))
            if follower is not None and follower.changed.is_set():
                if not follower.ended:
                    return True
                follower = None  # the poll failed: follow the runs shown; a reconnect polls again
            changed = await wait_any(subs, 0) if subs else []
            if changed:
                by_name.update({r.name: r for r in changed})
                await _send(request, stream, dag, [by_name[r.name] for r in runs])
            else:
                await stream.keepalive()
            if any(s.ended and not s.final for s in subs):
                return False  # the browser reconnects and subscribes again
            subs = [s for s in subs if not s.ended]
        if not subs and follower is None:
            await stream.send("end", "")
    return False


async def _first_of(events: list[asyncio.Event]) -> None:
    """Wait until one of ``events`` is set, at most ``KEEPALIVE_SECONDS``."""
    if any(e.is_set() for e in events):
        return
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


@routes.get("/dags/{dag_id}/graph")
async def graph_page(request: web.Request) -> web.Response:
    """The DAG's tasks and dependencies (its current version), coloured by their states in the run
    ``?run=RUN_ID`` or else the newest run."""
    session = require_session(request)
    api = request.app[API]
    dag_id = request.match_info["dag_id"]
    dag = await api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"), session.token)
    run_id = request.query.get("run", "")
    if not run_id:
        newest = await recent_runs(request, dag_id, session.token, 1)
        run_id = newest[0].run_id if newest else ""
    run = None
    if run_id:
        run = await api.call(
            api.runs.GetRun, api_pb2.GetRunRequest(name=f"dags/{dag_id}/runs/{run_id}"), session.token
        )
    return render(
        request,
        "graph.html",
        dag=dag,
        run=run,
        graph=shapes.graph(dag.spec, run),
        node_width=shapes.NODE_WIDTH,
        node_height=shapes.NODE_HEIGHT,
    )
