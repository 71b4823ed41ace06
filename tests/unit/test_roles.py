"""The one table of roles: every RPC of every proto has one, the roles nest as documented, and
docs/security.md's table of every RPC says what the code enforces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schedd.v1 import api_pb2, assets_pb2, secrets_pb2, worker_pb2
from schedd_auth import roles
from schedd_auth.tokens import new_token, parse


def every_rpc() -> list[str]:
    return [
        f"/{service.full_name}/{method.name}"
        for descriptor in (
            api_pb2.DESCRIPTOR,
            assets_pb2.DESCRIPTOR,
            secrets_pb2.DESCRIPTOR,
            worker_pb2.DESCRIPTOR,
        )
        for service in descriptor.services_by_name.values()
        for method in service.methods
    ]


def test_every_rpc_has_a_role() -> None:
    missing = [m for m in every_rpc() if m not in roles.METHODS]
    assert not missing, f"RPCs without a role in schedd_auth.roles.METHODS: {missing}"


def test_the_table_names_no_rpc_that_does_not_exist() -> None:
    assert set(roles.METHODS) <= set(every_rpc())


SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
_DOC_ROW = re.compile(r"^\| `(\w+)\.(\w+)` \| (\w+) \| (yes|no) \|$")


def documented_roles() -> dict[str, tuple[str, bool]]:
    """The rows of docs/security.md's table of every RPC: method -> (role, audited)."""
    rows: dict[str, tuple[str, bool]] = {}
    for line in SECURITY_DOC.read_text().splitlines():
        match = _DOC_ROW.match(line.strip())
        if match:
            service, method, role, audited = match.groups()
            rows[f"/schedd.v1.{service}/{method}"] = (role, audited == "yes")
    return rows


def test_the_documented_roles_are_the_enforced_ones() -> None:
    documented = documented_roles()
    enforced = {method: (access.role, access.audited) for method, access in roles.METHODS.items()}
    differing = {
        method: {"docs/security.md": documented.get(method), "roles.METHODS": enforced.get(method)}
        for method in documented.keys() | enforced.keys()
        if documented.get(method) != enforced.get(method)
    }
    assert not differing, differing


def test_only_admins_delete() -> None:
    deletes = [m for m in roles.METHODS if m.rsplit("/", 1)[-1].startswith("Delete")]
    assert deletes
    assert {m: roles.METHODS[m].role for m in deletes} == dict.fromkeys(deletes, roles.ADMIN)


def test_every_rpc_that_changes_something_is_audited() -> None:
    for method, access in roles.METHODS.items():
        if access.role in (roles.OPERATOR, roles.ADMIN) and not method.split("/")[-1].startswith(
            ("List", "Get")
        ):
            assert access.audited, method


@pytest.mark.parametrize(
    ("role", "needed", "allowed"),
    [
        (roles.VIEWER, roles.VIEWER, True),
        (roles.VIEWER, roles.OPERATOR, False),
        (roles.OPERATOR, roles.OPERATOR, True),
        (roles.OPERATOR, roles.ADMIN, False),
        (roles.ADMIN, roles.VIEWER, True),
        (roles.ADMIN, roles.ADMIN, True),
        (roles.ADMIN, roles.WORKER, False),
        (roles.WORKER, roles.WORKER, True),
        (roles.WORKER, roles.VIEWER, False),
        ("nobody", roles.VIEWER, False),
    ],
)
def test_roles_nest_and_the_worker_role_stands_apart(role: str, needed: str, allowed: bool) -> None:
    assert roles.allows(role, needed) is allowed


def test_health_and_reflection_are_public() -> None:
    assert roles.is_public("/grpc.health.v1.Health/Check")
    assert roles.is_public("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    assert not roles.is_public("/schedd.v1.RunService/CreateRun")
    assert not roles.is_public("garbage")


def test_a_token_parses_back_and_nothing_else_does() -> None:
    token = new_token()
    assert parse(str(token)) == token
    assert parse(f" {token}\n") == token
    for bad in (
        "",
        "sdt_",
        str(token)[:-1],
        str(token).replace("sdt_", "xyz_"),
        str(token) + "x",
        "sdt_\x00",
    ):
        assert parse(bad) is None, bad
