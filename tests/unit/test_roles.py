"""The one table of roles: every RPC of every proto has one, and the roles nest as documented."""

from __future__ import annotations

import pytest

from schedd.v1 import api_pb2, worker_pb2
from schedd_auth import roles
from schedd_auth.tokens import new_token, parse


def every_rpc() -> list[str]:
    return [
        f"/{service.full_name}/{method.name}"
        for descriptor in (api_pb2.DESCRIPTOR, worker_pb2.DESCRIPTOR)
        for service in descriptor.services_by_name.values()
        for method in service.methods
    ]


def test_every_rpc_has_a_role() -> None:
    missing = [m for m in every_rpc() if m not in roles.METHODS]
    assert not missing, f"RPCs without a role in schedd_auth.roles.METHODS: {missing}"


def test_the_table_names_no_rpc_that_does_not_exist() -> None:
    assert set(roles.METHODS) <= set(every_rpc())


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
