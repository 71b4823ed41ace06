"""A run's page (kept live by the shared run watch) and its changes: cancel the run, clear task
instances, mark one succeeded or failed. Each change first shows a confirmation page that says how
many task instances it changes (as the run stands when the page is made) and posts from there."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import present, run_history
from schedd_web.base import API, HUB, render, render_text
from schedd_web.live import FINAL_RUN_STATES
from schedd_web.security import require_operator, require_session
from schedd_web.sse import KEEPALIVE_SECONDS, MAX_STREAM_SECONDS, EventStream

routes = web.RouteTableDef()

RUN = "/dags/{dag_id}/runs/{run_id}"
FAILED = frozenset({pb.TASK_STATE_FAILED, pb.TASK_STATE_UPSTREAM_FAILED})
MARKABLE = {"success": pb.TASK_STATE_SUCCESS, "failed": pb.TASK_STATE_FAILED}


def run_name(request: web.Request) -> str:
    return f"dags/{request.match_info['dag_id']}/runs/{request.match_info['run_id']}"


async def get_run(request: web.Request, token: str) -> pb.DagRun:
    api = request.app[API]
    run: pb.DagRun = await api.call(api.runs.GetRun, api_pb2.GetRunRequest(name=run_name(request)), token)
    return run


async def _fragment(request: web.Request, run: pb.DagRun, history: run_history.History | None) -> str:
    """The live part of the run page: state, task instances and the timeline of every try, with the
    estimate of the run's end while it is unfinished (``history`` read once per page or stream)."""
    estimate = history.estimate(run) if history is not None else None
    attempts = await run_history.attempts_of(request, run, require_session(request).token)
    words = run_history.estimate_words(estimate)
    return render_text(
        request, "_run.html", run=run, attempts=attempts, estimate=estimate, estimate_words=words
    )


@routes.get(RUN)
async def run_page(request: web.Request) -> web.Response:
    session = require_session(request)
    run = await get_run(request, session.token)
    history = await run_history.history_of(request, run, session.token)
    done = request.query.get("done", "")
    count = int(request.query["n"]) if request.query.get("n", "").isdigit() else 0
    return render(
        request,
        "run.html",
        run=run,
        fragment=await _fragment(request, run, history),
        live=run.state not in FINAL_RUN_STATES,
        done=done if done in ("cancel", "clear", "mark") else "",
        count=count,
    )


@routes.get(RUN + "/events")
async def run_events(request: web.Request) -> web.StreamResponse:
    """The run's fragment at each change; ``end`` once the run is final. A stream that ends without
    ``end`` (its time is up, the api kept failing) is opened again by the browser."""
    session = require_session(request)
    # Subscribing reads the run first: a refusal is still an ordinary error page.
    async with (
        request.app[HUB].subscribe(run_name(request), session.token) as sub,
        EventStream(request) as stream,
    ):
        deadline = time.monotonic() + MAX_STREAM_SECONDS
        history: run_history.History | None = None
        while time.monotonic() < deadline:
            run = await sub.next(KEEPALIVE_SECONDS)
            if run is not None:
                history = history or await run_history.history_of(request, run, session.token)
                await stream.send("run", await _fragment(request, run, history))
            elif sub.ended:
                if sub.final:  # else the browser reconnects and subscribes again
                    await stream.send("end", "")
                break
            else:
                await stream.keepalive()
    return stream.response


# -- cancel ------------------------------------------------------------------------------------------


@routes.get(RUN + "/cancel")
async def cancel_confirm(request: web.Request) -> web.Response:
    session = require_operator(request)
    run = await get_run(request, session.token)
    open_tis = [t for t in run.task_instances if present.task_state(t.state) not in present.FINAL_TASK_STATES]
    return render(request, "confirm_cancel.html", run=run, changed=open_tis, request_id=secrets.token_hex(16))


@routes.post(RUN + "/cancel")
async def cancel(request: web.Request) -> web.Response:
    session = require_operator(request)
    form = await request.post()
    api = request.app[API]
    cancel_request = api_pb2.CancelRunRequest(
        name=run_name(request), request_id=str(form.get("request_id", ""))
    )
    run = await api.call(api.runs.CancelRun, cancel_request, session.token)
    raise web.HTTPSeeOther(present.run_url(run.dag_id, run.run_id) + "?done=cancel")


# -- clear -------------------------------------------------------------------------------------------


def _flag(values: Mapping[str, object], name: str) -> bool:
    return str(values.get(name, "")) in ("1", "on", "true")


async def clear_preview(
    request: web.Request,
    run: pb.DagRun,
    task_ids: list[str],
    *,
    downstream: bool,
    only_failed: bool,
    token: str,
    upstream: bool = False,
) -> list[pb.TaskInstance]:
    """The task instances a clear with these options resets, as the run stands now: the tasks named
    (all when none is), with ``downstream`` everything after them and with ``upstream`` everything
    before them in the run's DAG version, and with ``only_failed`` only those failed or
    upstream_failed."""
    # A key names a task (every instance of a mapped one) or one instance of a mapped task (``t[3]``).
    keys = set(task_ids)
    roots = {k.partition("[")[0] for k in keys} if keys else {t.task_id for t in run.task_instances}
    whole = {k for k in keys if "[" not in k} if keys else set(roots)
    if downstream or upstream:
        whole |= await _related(request, run, roots, token, down=downstream, up=upstream)
    return [
        t
        for t in run.task_instances
        if (t.task_id in whole or present.key_of(t) in keys) and (not only_failed or t.state in FAILED)
    ]


async def _related(
    request: web.Request, run: pb.DagRun, roots: set[str], token: str, *, down: bool, up: bool
) -> set[str]:
    """The tasks after (``down``) and before (``up``) ``roots`` in the run's DAG version (not the
    roots themselves)."""
    api = request.app[API]
    version = await api.call(
        api.dags.GetDagVersion,
        api_pb2.GetDagVersionRequest(name=f"dags/{run.dag_id}/versions/{run.dag_version}"),
        token,
    )
    children: dict[str, list[str]] = {}
    parents: dict[str, list[str]] = {}
    for task in version.spec.tasks:
        for parent in task.upstream:
            children.setdefault(parent, []).append(task.task_id)
            parents.setdefault(task.task_id, []).append(parent)
    found: set[str] = set()
    for edges, wanted in ((children, down), (parents, up)):
        pending = list(roots) if wanted else []
        reached: set[str] = set()
        while pending:
            for neighbour in edges.get(pending.pop(), []):
                if neighbour not in reached:
                    reached.add(neighbour)
                    pending.append(neighbour)
        found |= reached
    return found


@routes.get(RUN + "/clear")
async def clear_confirm(request: web.Request) -> web.Response:
    session = require_operator(request)
    run = await get_run(request, session.token)
    task_ids = request.query.getall("task", [])
    names = ("downstream", "upstream", "only_failed", "latest")
    options = {name: _flag(request.query, name) for name in names}
    changed = await clear_preview(
        request,
        run,
        task_ids,
        downstream=options["downstream"],
        only_failed=options["only_failed"],
        token=session.token,
        upstream=options["upstream"],
    )
    return render(
        request,
        "confirm_clear.html",
        run=run,
        task_ids=task_ids,
        options=options,
        changed=changed,
        request_id=secrets.token_hex(16),
    )


@routes.post(RUN + "/clear")
async def clear(request: web.Request) -> web.Response:
    session = require_operator(request)
    form = await request.post()
    api = request.app[API]
    clear_request = api_pb2.ClearTaskInstancesRequest(
        parent=run_name(request),
        task_ids=[str(t) for t in form.getall("task", [])],
        include_downstream=_flag(form, "downstream"),
        include_upstream=_flag(form, "upstream"),
        only_failed=_flag(form, "only_failed"),
        run_on_latest_version=_flag(form, "latest"),
        request_id=str(form.get("request_id", "")),
    )
    cleared = await api.call(api.runs.ClearTaskInstances, clear_request, session.token)
    url = present.run_url(request.match_info["dag_id"], request.match_info["run_id"])
    raise web.HTTPSeeOther(f"{url}?done=clear&n={len(cleared.cleared_task_ids)}")


# -- mark --------------------------------------------------------------------------------------------


def _mark_state(request: web.Request, value: object) -> str:
    state = str(value)
    if state not in MARKABLE:
        raise web.HTTPBadRequest(text=f"state: must be one of {', '.join(MARKABLE)}, not {state!r}")
    return state


@routes.get(RUN + "/tasks/{key}/mark")
async def mark_confirm(request: web.Request) -> web.Response:
    session = require_operator(request)
    state = _mark_state(request, request.query.get("state", ""))
    run = await get_run(request, session.token)
    key = request.match_info["key"]
    changed = [t for t in run.task_instances if present.key_of(t) == key]
    if not changed:
        raise web.HTTPNotFound(text=f"task: {key!r} is not a task instance of {run.name}")
    return render(
        request,
        "confirm_mark.html",
        run=run,
        key=key,
        state=state,
        changed=changed,
        request_id=secrets.token_hex(16),
    )


@routes.post(RUN + "/tasks/{key}/mark")
async def mark(request: web.Request) -> web.Response:
    session = require_operator(request)
    form = await request.post()
    state = _mark_state(request, form.get("state", ""))
    api = request.app[API]
    mark_request = api_pb2.SetTaskInstanceStateRequest(
        name=f"{run_name(request)}/tasks/{request.match_info['key']}",
        state=MARKABLE[state],
        request_id=str(form.get("request_id", "")),
        run_on_latest_version=_flag(form, "latest"),
    )
    await api.call(api.runs.SetTaskInstanceState, mark_request, session.token)
    url = present.run_url(request.match_info["dag_id"], request.match_info["run_id"])
    raise web.HTTPSeeOther(f"{url}?done=mark&n=1")
