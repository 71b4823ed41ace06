"""Backfills: the list with progress, one backfill, pausing, resuming and cancelling it (cancelling
asks first, saying how many runs in flight it cancels), and creating one from a form whose preview
is the api's dry run (the intervals it would run), with the api's field errors at their fields."""

from __future__ import annotations

import secrets

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import backfill_form
from schedd_web.api import ApiError
from schedd_web.backfill_form import BackfillForm
from schedd_web.base import API, render
from schedd_web.security import require_operator, require_session

routes = web.RouteTableDef()

#: Backfills listed at most, newest first.
LISTED = 50
CONTROLS = {"pause": "PauseBackfill", "resume": "ResumeBackfill"}


def backfill_state(value: pb.BackfillState.ValueType) -> str:
    return pb.BackfillState.Name(value).removeprefix("BACKFILL_STATE_").lower()


def _name(request: web.Request) -> str:
    backfill_id = request.match_info["backfill_id"]
    if not backfill_id.isdigit():
        raise web.HTTPNotFound(text=f"backfill: {backfill_id!r} is not a backfill id (a number)")
    return f"backfills/{backfill_id}"


async def _get(request: web.Request, token: str) -> pb.Backfill:
    api = request.app[API]
    found: pb.Backfill = await api.call(
        api.backfills.GetBackfill, api_pb2.GetBackfillRequest(name=_name(request)), token
    )
    return found


@routes.get("/backfills")
async def backfills_page(request: web.Request) -> web.Response:
    session = require_session(request)
    dag_id = request.query.get("dag", "").strip()
    api = request.app[API]
    listing = api_pb2.ListBackfillsRequest(parent=f"dags/{dag_id or '-'}", page_size=LISTED)
    found = await api.call(api.backfills.ListBackfills, listing, session.token)
    return render(
        request, "backfills.html", backfills=list(found.backfills), dag_id=dag_id, state_of=backfill_state
    )


@routes.get("/backfills/{backfill_id}")
async def backfill_page(request: web.Request) -> web.Response:
    session = require_session(request)
    backfill = await _get(request, session.token)
    return render(request, "backfill.html", backfill=backfill, state_of=backfill_state)


@routes.post("/backfills/{backfill_id}/{action:pause|resume}")
async def control(request: web.Request) -> web.Response:
    session = require_operator(request)
    api = request.app[API]
    method = getattr(api.backfills, CONTROLS[request.match_info["action"]])
    await api.call(method, api_pb2.GetBackfillRequest(name=_name(request)), session.token)
    raise web.HTTPSeeOther(f"/{_name(request)}")


@routes.get("/backfills/{backfill_id}/cancel")
async def cancel_confirm(request: web.Request) -> web.Response:
    session = require_operator(request)
    backfill = await _get(request, session.token)
    return render(request, "confirm_backfill_cancel.html", backfill=backfill, state_of=backfill_state)


@routes.post("/backfills/{backfill_id}/cancel")
async def cancel(request: web.Request) -> web.Response:
    session = require_operator(request)
    api = request.app[API]
    await api.call(
        api.backfills.CancelBackfill, api_pb2.GetBackfillRequest(name=_name(request)), session.token
    )
    raise web.HTTPSeeOther(f"/{_name(request)}")


async def _dag(request: web.Request, token: str) -> pb.Dag:
    api = request.app[API]
    name = f"dags/{request.match_info['dag_id']}"
    dag: pb.Dag = await api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=name), token)
    return dag


@routes.get("/dags/{dag_id}/backfill")
async def backfill_form_page(request: web.Request) -> web.Response:
    """The form; with ``preview`` in the query, also the api's dry run of what it asks for."""
    session = require_operator(request)
    dag = await _dag(request, session.token)
    if "preview" not in request.query:
        return _form(request, dag, BackfillForm.defaults())
    form = BackfillForm.of(request.query)
    wanted = backfill_form.read(form, dag.spec)
    if wanted is None:
        return _form(request, dag, form, status=400)
    api = request.app[API]
    dry = api_pb2.CreateBackfillRequest(parent=dag.name, backfill=wanted, dry_run=True)
    try:
        preview = await api.call(api.backfills.CreateBackfill, dry, session.token)
    except ApiError as exc:
        if not exc.fields:
            raise
        form.attach_api_errors(exc.fields)
        return _form(request, dag, form, status=400)
    return _form(request, dag, form, preview=preview)


def _form(
    request: web.Request,
    dag: pb.Dag,
    form: BackfillForm,
    *,
    preview: pb.Backfill | None = None,
    status: int = 200,
) -> web.Response:
    return render(
        request,
        "backfill_form.html",
        status=status,
        dag=dag,
        form=form,
        preview=preview,
        zone=dag.spec.timezone or "UTC",
        strategies=backfill_form.STRATEGIES,
        reprocess=backfill_form.REPROCESS,
        request_id=secrets.token_hex(16),
    )


@routes.post("/dags/{dag_id}/backfill")
async def create(request: web.Request) -> web.Response:
    session = require_operator(request)
    dag = await _dag(request, session.token)
    posted = await request.post()
    form = BackfillForm.of(posted)
    wanted = backfill_form.read(form, dag.spec)
    if wanted is None:
        return _form(request, dag, form, status=400)
    api = request.app[API]
    create_request = api_pb2.CreateBackfillRequest(
        parent=dag.name, backfill=wanted, request_id=str(posted.get("request_id", ""))
    )
    try:
        created = await api.call(api.backfills.CreateBackfill, create_request, session.token)
    except ApiError as exc:
        if not exc.fields:
            raise
        form.attach_api_errors(exc.fields)
        return _form(request, dag, form, status=400)
    raise web.HTTPSeeOther(f"/{created.name}")
