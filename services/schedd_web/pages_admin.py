"""The admin pages: the audit log (``/admin/audit``) and the api tokens (``/admin/tokens``).

Both are read with the session's own token, and the api gives ``ListAuditRecords``, ``ListTokens``,
``CreateToken`` and ``RevokeToken`` to admins only: anyone else gets the api's refusal as the page
(403 with the api's message), and the navigation offers the links to admins only.

* The audit log is shown newest first, :data:`AUDIT_PAGE` records a page, filtered by the api on
  the principal (a token's name), a method (a part of its name) and a status code; "older" follows
  the api's page token. Not guaranteed: a page once shown stays the same (newer records push the
  first page on).
* A new token's secret is shown once, on the page that answers the creation, and never again
  (the api keeps only its hash). Revoking asks first; a revoked token stays listed.
"""

from __future__ import annotations

import grpc
from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web.api import ApiError
from schedd_web.base import API, render
from schedd_web.pools_form import quoted
from schedd_web.security import require_session

routes = web.RouteTableDef()

#: Audit records a page.
AUDIT_PAGE = 50
#: Tokens listed at most.
MAX_TOKENS = 1000
#: Roles a token can be made with from the page (worker and enroll tokens are made with schedctl).
TOKEN_ROLES = ("viewer", "operator", "admin")
#: Longest filter value or token name accepted.
MAX_TEXT = 200


def _text(request: web.Request, name: str) -> str:
    return request.query.get(name, "").strip()[:MAX_TEXT]


@routes.get("/admin/audit")
async def audit_page(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    filters = {name: _text(request, name) for name in ("principal", "method", "code")}
    page_token = request.query.get("page", "")
    listed = await api.call(
        api.audit.ListAuditRecords,
        api_pb2.ListAuditRecordsRequest(
            page_size=AUDIT_PAGE,
            page_token=page_token,
            principal=filters["principal"],
            method=filters["method"],
            code=filters["code"],
        ),
        session.token,
    )
    query = "&".join(f"{k}={quoted(v)}" for k, v in filters.items() if v)
    return render(
        request,
        "audit.html",
        records=list(listed.records),
        filters=filters,
        first=not page_token,
        newest_url="/admin/audit" + (f"?{query}" if query else ""),
        older_url=(
            f"/admin/audit?{query + '&' if query else ''}page={quoted(listed.next_page_token)}"
            if listed.next_page_token
            else ""
        ),
    )


async def _tokens(request: web.Request, token: str, *, include_revoked: bool) -> list[pb.ApiToken]:
    api = request.app[API]
    found: list[pb.ApiToken] = []
    page_token = ""
    while len(found) < MAX_TOKENS:
        listed = await api.call(
            api.tokens.ListTokens,
            api_pb2.ListTokensRequest(page_size=100, page_token=page_token, include_revoked=include_revoked),
            token,
        )
        found.extend(listed.tokens)
        page_token = listed.next_page_token
        if not page_token:
            break
    return found[:MAX_TOKENS]


async def _tokens_page(
    request: web.Request,
    token: str,
    *,
    status: int = 200,
    created: api_pb2.CreateTokenResponse | None = None,
    form: dict[str, str] | None = None,
    error: str = "",
) -> web.Response:
    include_revoked = request.query.get("revoked") == "1"
    tokens = await _tokens(request, token, include_revoked=include_revoked)
    done = request.query.get("done") == "revoke"
    return render(
        request,
        "tokens.html",
        status=status,
        tokens=tokens,
        include_revoked=include_revoked,
        roles=TOKEN_ROLES,
        created=created,
        form=form or {"name": "", "role": "viewer"},
        error=error,
        revoked=_text(request, "what") if done else "",
    )


@routes.get("/admin/tokens")
async def tokens_page(request: web.Request) -> web.Response:
    session = require_session(request)
    return await _tokens_page(request, session.token)


@routes.post("/admin/tokens")
async def create_token(request: web.Request) -> web.Response:
    """``CreateToken``; the answer is the tokens page showing the new secret this once. A name the
    api refuses (taken, malformed) is shown at the name field."""
    session = require_session(request)
    posted = await request.post()
    form = {"name": str(posted.get("name", "")).strip()[:MAX_TEXT], "role": str(posted.get("role", ""))}
    api = request.app[API]
    try:
        create = api_pb2.CreateTokenRequest(name=form["name"], role=form["role"])
        created = await api.call(api.tokens.CreateToken, create, session.token)
    except ApiError as exc:
        if exc.code not in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS):
            raise
        return await _tokens_page(request, session.token, status=400, form=form, error=exc.message)
    return await _tokens_page(request, session.token, created=created)


async def _token(request: web.Request, token: str) -> pb.ApiToken:
    name = f"tokens/{request.match_info['name']}"
    for found in await _tokens(request, token, include_revoked=True):
        if found.name == name:
            return found
    raise web.HTTPNotFound(text=f"token: {request.match_info['name']!r} does not exist")


@routes.get("/admin/tokens/{name}/revoke")
async def revoke_confirm(request: web.Request) -> web.Response:
    session = require_session(request)
    token = await _token(request, session.token)
    return render(
        request,
        "confirm_revoke.html",
        token=token,
        own=bool(token.token_id) and session.token.startswith(f"sdt_{token.token_id}_"),
    )


@routes.post("/admin/tokens/{name}/revoke")
async def revoke(request: web.Request) -> web.Response:
    session = require_session(request)
    api = request.app[API]
    name = request.match_info["name"]
    await api.call(api.tokens.RevokeToken, api_pb2.RevokeTokenRequest(name=f"tokens/{name}"), session.token)
    raise web.HTTPSeeOther(f"/admin/tokens?revoked=1&done=revoke&what={quoted(name)}")
