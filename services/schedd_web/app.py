"""The aiohttp application: routes, templates, the api client and the shared run watches.

Pages are rendered on the server with Jinja2 autoescaping every value; the only script is
``static/app.js`` (the CSP allows no other), which opens the event streams and swaps in the HTML
fragments the server rendered. Errors of api calls become pages: an api that no longer accepts the
session's token ends the session and sends the browser to the sign-in page; a refusal, a missing
resource or bad input shows the api's own message with its status.
"""

from __future__ import annotations

import time

import grpc
import jinja2
from aiohttp import web

from schedd_web import (
    pages_admin,
    pages_assets,
    pages_auth,
    pages_backfills,
    pages_calendar,
    pages_cluster,
    pages_dags,
    pages_grid,
    pages_mapped,
    pages_runs,
    pages_tasks,
    pages_versions,
    present,
    shapes,
)
from schedd_web.api import Api, ApiError
from schedd_web.base import API, CONFIG, HERE, HUB, METRICS, TEMPLATES, render
from schedd_web.config import WebConfig
from schedd_web.live import RunHub
from schedd_web.metrics import WebMetrics
from schedd_web.runs_feed import FEED, DagRunsFeed
from schedd_web.security import (
    SECURE_COOKIES,
    SESSIONS,
    SIGNIN_PATH,
    Handler,
    add_headers,
    clear_session_cookie,
    current_session,
    guard,
)
from schedd_web.sessions import SessionStore

_STATUS_OF_CODE = {
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


@web.middleware
async def api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Failed api calls as pages (see the module docstring)."""
    try:
        return await handler(request)
    except ApiError as exc:
        if exc.code == grpc.StatusCode.UNAUTHENTICATED:
            session = current_session(request)
            if session is not None:
                request.app[SESSIONS].delete(session.id)
            response = web.HTTPSeeOther(f"{SIGNIN_PATH}?expired=1")
            clear_session_cookie(response)
            raise response from None
        status = _STATUS_OF_CODE.get(exc.code, 502)
        return render(request, "error.html", status=status, code=exc.code.name, message=exc.message)


@web.middleware
async def measured(request: web.Request, handler: Handler) -> web.StreamResponse:
    metrics = request.app[METRICS]
    route = request.match_info.route.resource
    label = route.canonical if route is not None else "unmatched"
    began = time.monotonic()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        metrics.requests.labels(route=label, status=str(status)).inc()
        if not label.endswith("/events"):
            metrics.seconds.labels(route=label).observe(time.monotonic() - began)


async def healthz(request: web.Request) -> web.Response:
    """200 while the process serves; it does not call the api (a page does, with a user's token)."""
    return web.Response(text="ok\n")


async def home(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther("/dags")


def make_app(config: WebConfig, metrics: WebMetrics | None = None) -> web.Application:
    app = web.Application(middlewares=[measured, guard, api_errors], client_max_size=256 * 1024)
    app[CONFIG] = config
    app[METRICS] = metrics or WebMetrics()
    app[SESSIONS] = SessionStore(idle_seconds=config.idle_seconds, max_age_seconds=config.max_age_seconds)
    app[SECURE_COOKIES] = config.cookie_secure
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(present.filters())
    env.globals.update(
        run_url=present.run_url,
        task_url=present.task_url,
        key_of=present.key_of,
        gantt=shapes.gantt,
        gantt_width=shapes.LABEL_WIDTH + shapes.CHART_WIDTH + 10,
        bar_height=shapes.BAR_HEIGHT,
    )
    app[TEMPLATES] = env
    app.on_response_prepare.append(add_headers)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/", home)
    app.router.add_static("/static", HERE / "static", append_version=False)
    pages = (pages_auth, pages_dags, pages_grid, pages_runs, pages_tasks, pages_backfills, pages_cluster)
    for module in (*pages, pages_admin, pages_mapped, pages_calendar, pages_versions, pages_assets):
        app.router.add_routes(module.routes)
    return app


async def _start(app: web.Application) -> None:
    config = app[CONFIG]
    app[API] = Api(config.api, config.api_tls)
    app[HUB] = RunHub(app[API], app[METRICS])
    app[FEED] = DagRunsFeed(app[API])
    app[METRICS].sessions.set_function(lambda: len(app[SESSIONS]))


async def _stop(app: web.Application) -> None:
    await app[HUB].close()
    await app[FEED].close()
    await app[API].close()
