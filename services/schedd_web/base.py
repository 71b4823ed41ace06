"""What every page module shares: the application's keys and rendering a template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from schedd_web.api import Api
from schedd_web.config import WebConfig
from schedd_web.live import RunHub
from schedd_web.metrics import WebMetrics
from schedd_web.security import current_session

HERE = Path(__file__).parent
API = web.AppKey("api", Api)
HUB = web.AppKey("hub", RunHub)
METRICS = web.AppKey("metrics", WebMetrics)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
CONFIG = web.AppKey("config", WebConfig)


def render(request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
    """The page ``template`` with ``context``, the session and its CSRF token."""
    text = render_text(request, template, **context)
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def render_text(request: web.Request, template: str, **context: Any) -> str:
    session = current_session(request)
    return (
        request.app[TEMPLATES]
        .get_template(template)
        .render(session=session, csrf=session.csrf if session else "", path=request.path, **context)
    )
