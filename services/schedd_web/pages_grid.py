"""A DAG's grid page, kept live by the shared run watches of its unfinished runs, and its graph."""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp import web

from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb
from schedd_web import grid, shapes
from schedd_web.base import API, HUB, render, render_text
from schedd_web.live import FINAL_RUN_STATES, wait_any
from schedd_web.pages_dags import recent_runs, schedule_text
from schedd_web.security import require_session
from schedd_web.sse import KEEPALIVE_SECONDS, MAX_STREAM_SECONDS, EventStream

routes = web.RouteTableDef()

#: Runs the grid shows.
GRID_RUNS = 20


async def _load(request: web.Request, token: str) -> tuple[pb.Dag, list[pb.DagRun]]:
    api = request.app[API]
    dag_id = request.match_info["dag_id"]
    dag = await api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"), token)
    listed = await recent_runs(request, dag_id, token, GRID_RUNS)
    # A listing carries no task instances: each run is read with them.
    reads = [api.call(api.runs.GetRun, api_pb2.GetRunRequest(name=r.name), token) for r in listed]
    return dag, list(await asyncio.gather(*reads))


def _fragment(request: web.Request, dag: pb.Dag, runs: list[pb.DagRun]) -> str:
    columns, rows = grid.build(dag.spec, runs)
    return render_text(request, "_grid.html", dag=dag, columns=columns, rows=rows)


@routes.get("/dags/{dag_id}/grid")
async def grid_page(request: web.Request) -> web.Response:
    session = require_session(request)
    dag, runs = await _load(request, session.token)
    live = any(r.state not in FINAL_RUN_STATES for r in runs)
    return render(
        request,
        "grid.html",
        dag=dag,
        schedule=schedule_text(dag.spec),
        fragment=_fragment(request, dag, runs),
        live=live,
    )


@routes.get("/dags/{dag_id}/grid/events")
async def grid_events(request: web.Request) -> web.StreamResponse:
    """The grid fragment, rendered again each time one of its unfinished runs changes; the stream
    ends (event ``end``) once none of them is unfinished."""
    session = require_session(request)
    dag, runs = await _load(request, session.token)
    hub = request.app[HUB]
    by_name = {r.name: r for r in runs}
    async with contextlib.AsyncExitStack() as stack:
        subs = [
            await stack.enter_async_context(hub.subscribe(r.name, session.token))
            for r in runs
            if r.state not in FINAL_RUN_STATES
        ]
        stream = await stack.enter_async_context(EventStream(request))
        deadline = time.monotonic() + MAX_STREAM_SECONDS
        while subs and time.monotonic() < deadline:
            changed = await wait_any(subs, KEEPALIVE_SECONDS)
            if changed:
                by_name.update({r.name: r for r in changed})
                current = [by_name[r.name] for r in runs]
                await stream.send("grid", _fragment(request, dag, current))
            else:
                await stream.keepalive()
            if any(s.ended and not s.final for s in subs):
                break  # the browser reconnects and subscribes again
            subs = [s for s in subs if not s.ended]
        if not subs:
            await stream.send("end", "")
    return stream.response


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
