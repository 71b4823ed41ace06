"""The DAGs list (with search, recent runs, pause switch and trigger button, and for admins the
registrations the api refused lately) and the trigger form."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aiohttp import web
from google.protobuf import struct_pb2, timestamp_pb2

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.limits import MAX_ID_CHARS
from schedd_web import forms, present
from schedd_web.api import ApiError
from schedd_web.base import API, render
from schedd_web.security import require_operator, require_session, safe_next
from schedd_web.sessions import Session

routes = web.RouteTableDef()

#: DAGs listed at most (the api pages through them 100 at a time).
MAX_DAGS = 500
#: Recent runs shown per DAG.
RECENT_RUNS = 8
#: Refused registrations listed (admins): the newest of this long ago or later.
REGISTRATION_ERRORS_SINCE = timedelta(days=1)
MAX_REGISTRATION_ERRORS = 20


@dataclass
class DagRow:
    dag: pb.Dag
    runs: list[pb.DagRun]

    @property
    def schedule(self) -> str:
        return schedule_text(self.dag.spec)


def schedule_text(spec: pb.DagSpec) -> str:
    """The schedule as written (cron or preset), a fixed interval, a trigger timetable, or ``manual``."""
    if spec.schedule:
        return spec.schedule
    if spec.HasField("schedule_interval"):
        return f"every {spec.schedule_interval.seconds}s"
    if spec.trigger.crons:
        return " | ".join(spec.trigger.crons)
    if spec.trigger.HasField("every"):
        return f"every {spec.trigger.every.seconds}s"
    if spec.trigger.events:
        return f"{len(spec.trigger.events)} event dates"
    return "manual"


def matches(dag: pb.Dag, query: str) -> bool:
    """Whether the search text is in the DAG's id, a tag or its description (any case)."""
    needle = query.casefold()
    haystack = [dag.dag_id, dag.spec.description, *dag.spec.tags]
    return any(needle in text.casefold() for text in haystack)


async def list_dags(request: web.Request, token: str) -> list[pb.Dag]:
    api = request.app[API]
    dags: list[pb.Dag] = []
    page_token = ""
    while len(dags) < MAX_DAGS:
        page = await api.call(
            api.dags.ListDags, api_pb2.ListDagsRequest(page_size=100, page_token=page_token), token
        )
        dags.extend(page.dags)
        page_token = page.next_page_token
        if not page_token:
            break
    return dags[:MAX_DAGS]


async def recent_runs(request: web.Request, dag_id: str, token: str, count: int) -> list[pb.DagRun]:
    """The DAG's newest ``count`` runs, newest first."""
    api = request.app[API]
    request_ = api_pb2.ListRunsRequest(parent=f"dags/{dag_id}", page_size=count)
    found = await api.call(api.runs.ListRuns, request_, token)
    return list(found.runs)


async def registration_errors(request: web.Request, session: Session) -> list[pb.AuditRecord]:
    """The registrations (``RegisterDag`` calls) the api refused in the last day, newest first, with
    the error each caller was told: schedd's import errors, since DAGs are registered by schedctl,
    not parsed by a server. From the audit log, which only admins may read: empty for other roles.
    At most :data:`MAX_REGISTRATION_ERRORS`, among the newest 100 registrations."""
    if session.role != "admin":
        return []
    since = timestamp_pb2.Timestamp()
    since.FromDatetime(datetime.now(UTC) - REGISTRATION_ERRORS_SINCE)
    api = request.app[API]
    listed = await api.call(
        api.audit.ListAuditRecords,
        api_pb2.ListAuditRecordsRequest(method="RegisterDag", since=since, page_size=100),
        session.token,
    )
    return [record for record in listed.records if record.code != "OK"][:MAX_REGISTRATION_ERRORS]


@routes.get("/dags")
async def dags_page(request: web.Request) -> web.Response:
    session = require_session(request)
    query = request.query.get("q", "").strip()
    dags = [d for d in await list_dags(request, session.token) if not query or matches(d, query)]
    runs, errors = await asyncio.gather(
        asyncio.gather(*(recent_runs(request, d.dag_id, session.token, RECENT_RUNS) for d in dags)),
        registration_errors(request, session),
    )
    rows = [DagRow(dag, list(reversed(dag_runs))) for dag, dag_runs in zip(dags, runs, strict=True)]
    return render(request, "dags.html", rows=rows, query=query, registration_errors=errors)


@routes.post("/dags/{dag_id}/pause")
async def pause(request: web.Request) -> web.Response:
    session = require_operator(request)
    form = await request.post()
    name = f"dags/{request.match_info['dag_id']}"
    api = request.app[API]
    method = api.dags.PauseDag if form.get("paused") == "true" else api.dags.UnpauseDag
    await api.call(method, api_pb2.PauseDagRequest(name=name), session.token)
    raise web.HTTPSeeOther(safe_next(str(form.get("next", "/dags"))))


async def _get_dag(request: web.Request, token: str) -> pb.Dag:
    api = request.app[API]
    name = f"dags/{request.match_info['dag_id']}"
    dag: pb.Dag = await api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=name), token)
    return dag


@routes.get("/dags/{dag_id}/trigger")
async def trigger_form(request: web.Request) -> web.Response:
    session = require_operator(request)
    dag = await _get_dag(request, session.token)
    fields = forms.param_fields(dag.spec)
    return _trigger_page(request, dag, fields, request_id=secrets.token_hex(16))


def _trigger_page(
    request: web.Request,
    dag: pb.Dag,
    fields: list[forms.ParamField],
    *,
    request_id: str,
    run_id: str = "",
    errors: dict[str, str] | None = None,
    status: int = 200,
) -> web.Response:
    return render(
        request,
        "trigger.html",
        status=status,
        dag=dag,
        fields=fields,
        request_id=request_id,
        run_id=run_id,
        errors=errors or {},
    )


@routes.post("/dags/{dag_id}/trigger")
async def trigger(request: web.Request) -> web.Response:
    session = require_operator(request)
    dag = await _get_dag(request, session.token)
    form = await request.post()
    fields = forms.param_fields(dag.spec)
    conf = forms.read_conf(fields, form)
    run_id = str(form.get("run_id", "")).strip()
    request_id = str(form.get("request_id", "")) or secrets.token_hex(16)
    if len(run_id) > MAX_ID_CHARS:
        errors = {"run_id": f"at most {MAX_ID_CHARS} characters"}
        return _trigger_page(
            request, dag, fields, request_id=request_id, run_id=run_id, errors=errors, status=400
        )
    if forms.has_errors(fields):
        return _trigger_page(request, dag, fields, request_id=request_id, run_id=run_id, status=400)
    struct = struct_pb2.Struct()
    struct.update(conf)
    api = request.app[API]
    create = api_pb2.CreateRunRequest(parent=dag.name, run_id=run_id, conf=struct, request_id=request_id)
    try:
        run = await api.call(api.runs.CreateRun, create, session.token)
    except ApiError as exc:
        if not exc.fields:
            raise
        rest = forms.attach_api_errors(fields, exc.fields)
        return _trigger_page(
            request, dag, fields, request_id=request_id, run_id=run_id, errors=rest, status=400
        )
    raise web.HTTPSeeOther(present.run_url(run.dag_id, run.run_id))
