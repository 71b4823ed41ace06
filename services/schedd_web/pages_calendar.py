"""A DAG's calendar: its runs by day over the last weeks (``/dags/{dag}/calendar``), each day linking
to a page of that day's runs (``/dags/{dag}/calendar/{YYYY-MM-DD}``), and the DAG's next runs with
their data intervals (``ListNextRuns``).

Runs are read by logical date (``ListRuns`` with a logical-date range, newest first), at most
``MAX_RUNS`` for the calendar; the page says when there were more. Days are UTC days.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, time, timedelta

from aiohttp import web
from google.protobuf.timestamp_pb2 import Timestamp

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import calendar_days
from schedd_web.base import API, render
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Runs read for a calendar at most, and per page of reading.
MAX_RUNS, PAGE_RUNS = 5000, 500
#: Next runs shown.
NEXT_RUNS = 5


def _ts(day: date) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(datetime.combine(day, time(), UTC))
    return ts


async def runs_between(
    request: web.Request, dag_id: str, token: str, first: date, last: date, limit: int
) -> tuple[list[pb.DagRun], bool]:
    """The DAG's runs whose logical date falls on the days ``first`` to ``last`` (UTC), newest
    first, at most ``limit``; and whether there were more."""
    api = request.app[API]
    found: list[pb.DagRun] = []
    page_token = ""
    while True:
        listing = api_pb2.ListRunsRequest(
            parent=f"dags/{dag_id}",
            page_size=min(PAGE_RUNS, limit + 1 - len(found)),
            page_token=page_token,
            logical_date_from=_ts(first),
            logical_date_until=_ts(last + timedelta(days=1)),
            order_by="logical_date desc",
        )
        page = await api.call(api.runs.ListRuns, listing, token)
        found.extend(page.runs)
        page_token = page.next_page_token
        if not page_token or len(found) > limit:
            return found[:limit], len(found) > limit


@routes.get("/dags/{dag_id}/calendar")
async def calendar_page(request: web.Request) -> web.Response:
    session = require_session(request)
    try:
        weeks = calendar_days.read_weeks(request.query.get("weeks", ""))
    except ValueError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    api = request.app[API]
    dag_id = request.match_info["dag_id"]
    today = datetime.now(UTC).date()
    first, _ = calendar_days.window(today, weeks)
    dag, (runs, more), upcoming = await asyncio.gather(
        api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"), session.token),
        runs_between(request, dag_id, session.token, first, today, MAX_RUNS),
        api.call(
            api.dags.ListNextRuns,
            api_pb2.ListNextRunsRequest(name=f"dags/{dag_id}", count=NEXT_RUNS),
            session.token,
        ),
    )
    return render(
        request,
        "calendar.html",
        dag=dag,
        weeks=calendar_days.weeks_of(runs, today, weeks),
        week_count=weeks,
        today=today,
        total=len(runs),
        more=more,
        max_runs=MAX_RUNS,
        next_runs=list(upcoming.intervals),
    )


@routes.get("/dags/{dag_id}/calendar/{day}")
async def day_page(request: web.Request) -> web.Response:
    """The runs of one UTC day (by logical date), newest first, each a link to its page."""
    session = require_session(request)
    try:
        day = calendar_days.read_day(request.match_info["day"])
    except ValueError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    api = request.app[API]
    dag_id = request.match_info["dag_id"]
    dag, (runs, more) = await asyncio.gather(
        api.call(api.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"), session.token),
        runs_between(request, dag_id, session.token, day, day, MAX_RUNS),
    )
    return render(request, "calendar_day.html", dag=dag, day=day, runs=runs, more=more)
