"""A task instance's page: its tries, the log of one try streamed live, its result, and why it
waits (``ExplainTaskInstance``)."""

from __future__ import annotations

import contextlib
import json
import time

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import present
from schedd_web.api import ApiError
from schedd_web.base import API, render
from schedd_web.pages_runs import RUN, get_run, run_name
from schedd_web.security import require_session
from schedd_web.sse import KEEPALIVE_SECONDS, MAX_STREAM_SECONDS, EventStream, with_pauses

routes = web.RouteTableDef()

TASK = RUN + "/tasks/{key}"
#: Bytes of log per event at most.
LOG_CHUNK_BYTES = 64 * 1024


def _try_number(request: web.Request, latest: int) -> int:
    raw = request.query.get("try", "")
    if not raw:
        return max(latest, 1)
    if not raw.isdigit() or int(raw) < 1:
        raise web.HTTPBadRequest(text=f"try: must be a positive whole number, not {raw!r}")
    return int(raw)


def _instance(run: pb.DagRun, key: str) -> pb.TaskInstance:
    for ti in run.task_instances:
        if present.key_of(ti) == key:
            return ti
    raise web.HTTPNotFound(text=f"task: {key!r} is not a task instance of {run.name}")


@routes.get(TASK)
async def task_page(request: web.Request) -> web.Response:
    session = require_session(request)
    run = await get_run(request, session.token)
    key = request.match_info["key"]
    ti = _instance(run, key)
    name = f"{run_name(request)}/tasks/{key}"
    api = request.app[API]
    result = None
    if ti.state == pb.TASK_STATE_SUCCESS:
        stored = await api.call(
            api.runs.GetTaskResult, api_pb2.GetTaskResultRequest(name=name), session.token
        )
        result = present.as_json(stored.value) if stored.has_value else None
    explanation = await api.call(
        api.runs.ExplainTaskInstance, api_pb2.ExplainTaskInstanceRequest(name=name), session.token
    )
    return render(
        request,
        "task.html",
        run=run,
        ti=ti,
        key=key,
        selected_try=_try_number(request, ti.try_number),
        result=result,
        reasons=list(explanation.reasons),
    )


@routes.get(TASK + "/logs")
async def task_logs(request: web.Request) -> web.StreamResponse:
    """The try's log as events: ``log`` (JSON: the text, whether the try ended, the task's state,
    the try and how many tries the task may have, so a page can follow it to its next try),
    each with the offset to resume from as its id (a reconnecting browser sends it back), then
    ``end`` once the try ended. The api waits for a try that has not started. Like every event
    stream, it sends keepalives and ends after ``MAX_STREAM_SECONDS``; the upstream stream closes
    with it."""
    session = require_session(request)
    name = f"{run_name(request)}/tasks/{request.match_info['key']}"
    try_number = _try_number(request, 1)
    resume = request.headers.get("Last-Event-ID", "")
    offset = int(resume) if resume.isdigit() else 0
    watch = api_pb2.GetTaskLogsRequest(
        name=name, try_number=try_number, offset=offset, max_bytes=LOG_CHUNK_BYTES
    )
    deadline = time.monotonic() + MAX_STREAM_SECONDS
    upstream = with_pauses(request.app[API].watch_logs(watch, session.token), KEEPALIVE_SECONDS)
    async with EventStream(request) as stream, contextlib.aclosing(upstream):
        try:
            async for logs in upstream:
                if logs is None:
                    await stream.keepalive()
                    if time.monotonic() > deadline:
                        return stream.response  # the browser reconnects from the offset it has
                    continue
                state = present.task_state(logs.state)
                data = {
                    "text": logs.data,
                    "complete": logs.complete,
                    "state": state,
                    "try": logs.try_number,
                    "max_tries": logs.max_tries,
                }
                await stream.send("log", json.dumps(data), event_id=str(logs.next_offset))
                if logs.complete:
                    break
        except ApiError as exc:  # the page is streaming already: say it in the stream
            await stream.send("failed", json.dumps({"message": f"{exc.code.name}: {exc.message}"}))
        else:
            await stream.send("end", "")
    return stream.response
