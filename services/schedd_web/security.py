"""What every request of the web service passes: security headers, the session cookie, and the
checks that make a change request come from one of our own pages.

* Every response carries a strict Content-Security-Policy (scripts, styles and connections only
  from this origin: no inline script or style, no plugin, no framing, forms post only here),
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin`` and, for pages,
  ``Cache-Control: no-store``.
* The session cookie is HttpOnly, SameSite=Strict, Path=/ and Secure when the UI is served over TLS
  (or ``SCHEDD_WEB_SECURE_COOKIES`` says a TLS proxy is in front).
* A request that is not GET or HEAD is refused (403, nothing done) unless its ``Origin`` (when the
  browser sends one) is this host, and it carries the CSRF token of its session in the form field
  ``csrf``; the sign-in form, which has no session yet, carries the random value of a short-lived
  ``schedd_signin`` cookie instead (a double-submit token), so another site cannot sign a browser in
  with a token of its choosing.

Not guaranteed: anything about a browser that ignores SameSite or CSP; the api's roles remain what
protects the data, the UI only avoids offering what a role cannot do.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from aiohttp import web

from schedd_web.sessions import Session, SessionStore

SESSION_COOKIE = "schedd_session"
SIGNIN_COOKIE = "schedd_signin"
SIGNIN_PATH = "/signin"
#: Seconds the sign-in form's double-submit cookie lives.
SIGNIN_COOKIE_SECONDS = 3600

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SAFE_METHODS = frozenset({"GET", "HEAD"})

SESSIONS = web.AppKey("sessions", SessionStore)
SECURE_COOKIES = web.AppKey("secure_cookies", bool)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the security headers of every response, errors and streams included."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    if not request.path.startswith("/static/"):
        response.headers.setdefault("Cache-Control", "no-store")


def current_session(request: web.Request) -> Session | None:
    """The request's live session, None when it has none (or it expired)."""
    session: Session | None = request.get("session")
    return session


def require_session(request: web.Request) -> Session:
    """The request's session; without one, a redirect to the sign-in page that comes back here."""
    session = current_session(request)
    if session is None:
        raise web.HTTPSeeOther(f"{SIGNIN_PATH}?next={_quote_next(request.path_qs)}")
    return session


def require_operator(request: web.Request) -> Session:
    """The session of a role that may change things; 403 otherwise (the api would refuse it too)."""
    session = require_session(request)
    if not session.can_operate:
        raise web.HTTPForbidden(text=f"your role ({session.role}) may not change anything")
    return session


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    store = request.app[SESSIONS]
    session_id = request.cookies.get(SESSION_COOKIE, "")
    request["session"] = store.get(session_id) if session_id else None
    if request.method not in SAFE_METHODS:
        await _check_change_request(request)
    return await handler(request)


async def _check_change_request(request: web.Request) -> None:
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise web.HTTPForbidden(text="refused: the request came from another site")
    form = await request.post()
    sent = form.get("csrf")
    if not isinstance(sent, str) or not sent:
        raise web.HTTPForbidden(text="refused: the form has no CSRF token; reload the page")
    if request.path == SIGNIN_PATH:
        expected = request.cookies.get(SIGNIN_COOKIE, "")
        if not expected or not hmac.compare_digest(expected.encode(), sent.encode()):
            raise web.HTTPForbidden(text="refused: the sign-in form expired; reload the page")
        return
    session = current_session(request)
    if session is None:
        raise web.HTTPSeeOther(SIGNIN_PATH)
    if not session.csrf_matches(sent):
        raise web.HTTPForbidden(text="refused: wrong CSRF token; reload the page")


def new_signin_token() -> str:
    """A fresh double-submit value for the sign-in form (see :func:`set_signin_cookie`)."""
    return secrets.token_urlsafe(24)


def set_signin_cookie(request: web.Request, response: web.StreamResponse, value: str) -> None:
    _set_cookie(request, response, SIGNIN_COOKIE, value, max_age=SIGNIN_COOKIE_SECONDS)


def set_session_cookie(request: web.Request, response: web.StreamResponse, session: Session) -> None:
    _set_cookie(request, response, SESSION_COOKIE, session.id, max_age=None)
    response.del_cookie(SIGNIN_COOKIE, path="/")


def clear_session_cookie(response: web.StreamResponse) -> None:
    response.del_cookie(SESSION_COOKIE, path="/")


def _set_cookie(
    request: web.Request, response: web.StreamResponse, name: str, value: str, *, max_age: int | None
) -> None:
    response.set_cookie(
        name,
        value,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.app[SECURE_COOKIES],
        max_age=max_age,
    )


def safe_next(target: str) -> str:
    """``target`` when it is a path of this site, else ``/``: the sign-in page never sends a browser
    to another site (no scheme, no host, no ``//`` or backslash tricks)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else "/"


def _quote_next(path_qs: str) -> str:
    return quote(path_qs, safe="")
