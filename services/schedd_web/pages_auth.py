"""Signing in with an api token, and signing out."""

from __future__ import annotations

import grpc
from aiohttp import web

from schedd_web.api import ApiError
from schedd_web.base import API, render
from schedd_web.security import (
    SESSIONS,
    clear_session_cookie,
    current_session,
    new_signin_token,
    safe_next,
    set_session_cookie,
    set_signin_cookie,
)

routes = web.RouteTableDef()

#: Longest token accepted in the form (a schedd token is 60 characters).
MAX_TOKEN_CHARS = 512


def _form(request: web.Request, *, status: int = 200, error: str = "", next_path: str = "/") -> web.Response:
    token = new_signin_token()
    response = render(
        request,
        "signin.html",
        status=status,
        error=error,
        next_path=safe_next(next_path),
        expired=request.query.get("expired") == "1",
        signin_csrf=token,
    )
    set_signin_cookie(request, response, token)
    return response


@routes.get("/signin")
async def signin_form(request: web.Request) -> web.Response:
    return _form(request, next_path=request.query.get("next", "/"))


@routes.post("/signin")
async def signin(request: web.Request) -> web.Response:
    form = await request.post()
    token = str(form.get("token", "")).strip()
    next_path = str(form.get("next", "/"))
    if not token:
        return _form(request, status=400, error="token: enter an api token", next_path=next_path)
    if len(token) > MAX_TOKEN_CHARS:
        return _form(request, status=400, error="token: too long to be an api token", next_path=next_path)
    try:
        identity = await request.app[API].identify(token)
    except ApiError as exc:
        if exc.code == grpc.StatusCode.UNAUTHENTICATED:
            return _form(
                request, status=401, error="token: the api does not accept this token", next_path=next_path
            )
        raise
    old = current_session(request)
    if old is not None:
        request.app[SESSIONS].delete(old.id)
    session = request.app[SESSIONS].create(token, identity.role, identity.principal)
    response = web.HTTPSeeOther(safe_next(next_path))
    set_session_cookie(request, response, session)
    raise response


@routes.post("/signout")
async def signout(request: web.Request) -> web.Response:
    session = current_session(request)
    if session is not None:
        request.app[SESSIONS].delete(session.id)
    response = web.HTTPSeeOther("/signin")
    clear_session_cookie(response)
    raise response
