"""A mapped task's instances in one run, a page at a time (``.../mapped/{task_id}?page=N``), filtered
by state (``&state=failed``), with the count of each state over all of them.

A mapped task may expand into a thousand instances (the planner's limit is 1,024): its grid cell
links here rather than to the run page, so a page holds at most :data:`PAGE_SIZE` rows however
many instances there are. Guaranteed: the counts and the page come from one read of the run. Not
guaranteed: the page stays current (it is not live; reload it).
"""

from __future__ import annotations

from aiohttp import web

from schedd.v1 import resources_pb2 as pb
from schedd_web import present
from schedd_web.base import render
from schedd_web.pages_runs import RUN, get_run
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Instances a page lists.
PAGE_SIZE = 100


def _page_number(request: web.Request) -> int:
    raw = request.query.get("page", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise web.HTTPBadRequest(text=f"page: must be a positive whole number, not {raw!r}")
    return int(raw)


@routes.get(RUN + "/mapped/{task_id}")
async def mapped_page(request: web.Request) -> web.Response:
    session = require_session(request)
    run = await get_run(request, session.token)
    task_id = request.match_info["task_id"]
    instances = [t for t in run.task_instances if t.task_id == task_id]
    if not instances:
        raise web.HTTPNotFound(text=f"task: {task_id!r} has no instance in {run.name}")
    state = request.query.get("state", "")
    shown: list[pb.TaskInstance] = [t for t in instances if not state or present.task_state(t.state) == state]
    number = _page_number(request)
    pages = max(1, -(-len(shown) // PAGE_SIZE))
    base = f"{present.run_url(run.dag_id, run.run_id)}/mapped/{present.path_part(task_id)}"
    state_query = f"&state={present.path_part(state)}" if state else ""
    return render(
        request,
        "mapped.html",
        run=run,
        task_id=task_id,
        total=len(instances),
        counts=present.state_counts(instances),
        state=state,
        instances=shown[(number - 1) * PAGE_SIZE : number * PAGE_SIZE],
        number=number,
        pages=pages,
        base=base,
        newer_url=f"{base}?page={number - 1}{state_query}" if number > 1 else "",
        next_url=f"{base}?page={number + 1}{state_query}" if number < pages else "",
    )
