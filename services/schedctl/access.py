"""``schedctl tokens`` and ``schedctl audit``: who may call the api, and what was done (admin)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from google.protobuf import timestamp_pb2
from rich.table import Table

from schedctl import output
from schedctl.cli import EXIT_REJECTED, OutputOption, app, call, collect, fail, show, state, use_format
from schedd.v1 import api_pb2, resources_pb2 as pb

tokens_app = typer.Typer(help="Create, list and revoke bearer tokens (admin).", no_args_is_help=True)
audit_app = typer.Typer(help="Read the audit log (admin).", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")
app.add_typer(audit_app, name="audit")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def parse_age(option: str, text: str) -> timedelta:
    """``90s``, ``30m``, ``12h``, ``7d``."""
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.isdigit() or not 0 < int(number) <= 10**6:
        fail(EXIT_REJECTED, f"{option} {text!r} must be a positive number with s, m, h or d (e.g. 30d)")
    return timedelta(seconds=int(number) * _UNITS[unit])


def tokens_table(tokens: list[pb.ApiToken]) -> Table:
    table = Table("NAME", "ROLE", "WORKER", "QUEUES", "USES", "CREATED", "EXPIRES", "REVOKED")
    for t in tokens:
        table.add_row(
            t.name.removeprefix("tokens/"),
            t.role,
            t.worker_id or "-",
            ",".join(t.queues) or "-",
            (f"{t.uses}/{t.max_uses or 'any'}") if t.role == "enroll" else "-",
            output.utc(t.create_time),
            output.utc(t.expire_time) if t.HasField("expire_time") else "never",
            output.utc(t.revoke_time) if t.HasField("revoke_time") else "-",
        )
    return table


def audit_table(records: list[pb.AuditRecord]) -> Table:
    table = Table("TIME", "PRINCIPAL", "METHOD", "RESOURCE", "CODE", "REQUEST ID", "DETAIL")
    for r in records:
        table.add_row(
            output.utc(r.time),
            r.principal,
            r.method.rsplit("/", 1)[-1],
            r.resource or "-",
            output.styled_code(r.code),
            r.request_id or "-",
            r.detail,
        )
    return table


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="a unique name for the token (who or what uses it)")],
    role: Annotated[str, typer.Option(help="viewer, operator, admin, worker or enroll")] = "viewer",
    worker_id: Annotated[
        str, typer.Option(help="role worker only: the one worker id it may connect as")
    ] = "",
    queues: Annotated[
        str, typer.Option(help="roles worker and enroll: the only queues its workers may take (q1,q2)")
    ] = "",
    max_uses: Annotated[
        int, typer.Option(help="role enroll only: how many workers it may enroll; default any")
    ] = 0,
    expires_in: Annotated[str, typer.Option(help="expire after this long: 12h, 30d; default never")] = "",
    output_format: OutputOption = None,
) -> None:
    """Create a token; it is printed once and cannot be shown again."""
    use_format(output_format)
    request = api_pb2.CreateTokenRequest(
        name=name,
        role=role,
        worker_id=worker_id,
        queues=[q.strip() for q in queues.split(",") if q.strip()],
        max_uses=max_uses,
    )
    if expires_in:
        request.expire_time.CopyFrom(_timestamp(datetime.now(UTC) + parse_age("--expires-in", expires_in)))
    resp = call(state.client.tokens.CreateToken, request)
    assert isinstance(resp, api_pb2.CreateTokenResponse)
    show(resp, resp.secret)
    output.err_console.print(
        f"token {name} ({resp.token.role}) created; it is not shown again", highlight=False
    )


@tokens_app.command("list")
def tokens_list(
    revoked: Annotated[bool, typer.Option("--revoked", help="include revoked tokens")] = False,
    output_format: OutputOption = None,
) -> None:
    """List tokens (never their secrets)."""
    use_format(output_format)
    request = api_pb2.ListTokensRequest(include_revoked=revoked)
    found: list[pb.ApiToken] = collect(state.client.tokens.ListTokens, request, "tokens")
    show(found, tokens_table(found), empty="no tokens")


@tokens_app.command("revoke")
def tokens_revoke(
    name: Annotated[str, typer.Argument(help="the token's name")], output_format: OutputOption = None
) -> None:
    """Revoke a token: every call with it is refused from now on."""
    use_format(output_format)
    resp = call(state.client.tokens.RevokeToken, api_pb2.RevokeTokenRequest(name=f"tokens/{name}"))
    assert isinstance(resp, pb.ApiToken)
    show(resp, f"token {name} revoked")


@audit_app.command("list")
def audit_list(
    principal: Annotated[str, typer.Option(help="only calls by this token name")] = "",
    method: Annotated[str, typer.Option(help="only methods whose name contains this (CreateRun)")] = "",
    code: Annotated[str, typer.Option(help="only calls that ended with this code (PERMISSION_DENIED)")] = "",
    since: Annotated[str, typer.Option(help="only this recent: 30m, 12h, 7d")] = "",
    limit: Annotated[int, typer.Option(help="at most this many records, newest first")] = 100,
    output_format: OutputOption = None,
) -> None:
    """Audited calls, newest first: every call that changed something and every refused call."""
    use_format(output_format)
    if not 0 < limit <= 100_000:
        fail(EXIT_REJECTED, "--limit must be between 1 and 100000")
    request = api_pb2.ListAuditRecordsRequest(principal=principal, method=method, code=code.upper())
    if since:
        request.since.CopyFrom(_timestamp(datetime.now(UTC) - parse_age("--since", since)))
    found: list[pb.AuditRecord] = collect(state.client.audit.ListAuditRecords, request, "records", limit)
    show(found, audit_table(found), empty="no audit records")
