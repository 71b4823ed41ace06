"""Who may touch which of schedd's keys in etcd: the users, their roles, and one routine that sets
them up and turns authentication on.

Every key schedd keeps in etcd is under one of two prefixes:

* ``/schedd/scheduler/`` -- the leader key and the replicas' member keys (:mod:`.election`);
* ``/schedd/workers/`` -- one liveness key per worker (:mod:`.members`).

The users (each with a role of the same name):

* ``root`` -- etcd's administrator; only this routine and operators use it;
* ``schedd-scheduler`` -- reads and writes ``/schedd/scheduler/``, reads ``/schedd/workers/``;
* ``schedd-api`` -- reads ``/schedd/scheduler/`` (the leader status);
* ``schedd-worker`` -- reads and writes ``/schedd/workers/``.

The registry does not use etcd and has no user. What this does not give: one user per worker. Every
worker shares ``schedd-worker``, so a worker can overwrite or delete another worker's liveness key
and revoke its lease (making the leader look at that worker's attempts one fence window early); no
worker can touch the election. etcd checks a lease revocation against the keys attached to the lease
but a keep-alive against nothing (not even a token): whoever reaches etcd and knows a lease id can
keep it alive, though not end it early (docs/security.md).

:func:`ensure_access` is idempotent: users already there get the given password, roles get any
missing permission (a permission granted by hand and not listed here is left alone).
``schedd-etcd-setup`` (``python -m schedd_coord.access``) runs it for a deployment (see ``main``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from aetcd import rpc

from schedd_coord.client import EtcdClient, prefix_end
from schedd_coord.credentials import EtcdAuth
from schedd_coord.errors import CoordinationError
from schedd_coord.members import WORKERS_PREFIX

ROOT_USER = "root"
SCHEDULER_USER = "schedd-scheduler"
API_USER = "schedd-api"
WORKER_USER = "schedd-worker"
SCHEDULER_PREFIX = b"/schedd/scheduler/"

ENDPOINTS_ENV = "SCHEDD_ETCD_ENDPOINTS"
ROOT_PASSWORD_FILE_ENV = "SCHEDD_ETCD_ROOT_PASSWORD_FILE"
PASSWORDS_DIR_ENV = "SCHEDD_ETCD_PASSWORDS_DIR"

_EXISTS = "already exists"
_READ, _WRITE, _READWRITE = 0, 1, 2


@dataclass(frozen=True)
class Grant:
    """Access to every key under ``prefix``: read only, or read and write."""

    prefix: bytes
    write: bool


#: The role of each service user (a role per user, named like it).
ROLES: Mapping[str, tuple[Grant, ...]] = {
    SCHEDULER_USER: (Grant(SCHEDULER_PREFIX, write=True), Grant(WORKERS_PREFIX, write=False)),
    API_USER: (Grant(SCHEDULER_PREFIX, write=False),),
    WORKER_USER: (Grant(WORKERS_PREFIX, write=True),),
}

#: Every user :func:`ensure_access` needs a password for.
USERS = (ROOT_USER, *ROLES)


async def ensure_access(client: EtcdClient, passwords: Mapping[str, str]) -> None:
    """Create (or update) ``root`` and the users of :data:`ROLES` with ``passwords`` (by user name;
    every one of :data:`USERS` is needed), then turn authentication on.

    ``client`` authenticates as root (or talks to an etcd that has authentication off). Raises
    ValueError for a missing password, CoordinationError for what etcd refuses.
    """
    missing = [user for user in USERS if not passwords.get(user)]
    if missing:
        raise ValueError(f"no etcd password for {', '.join(missing)}")
    await _ensure_user(client, ROOT_USER, passwords[ROOT_USER], ROOT_USER)
    for user, grants in ROLES.items():
        await _ensure_role(client, user, grants)
        await _ensure_user(client, user, passwords[user], user)
    await _ignore_exists(client, client.auth.AuthEnable, rpc.AuthEnableRequest())


async def _ensure_role(client: EtcdClient, role: str, grants: tuple[Grant, ...]) -> None:
    await _ignore_exists(client, client.auth.RoleAdd, rpc.AuthRoleAddRequest(name=role))
    for grant in grants:
        permission = rpc.Permission(
            permType=_READWRITE if grant.write else _READ,
            key=grant.prefix,
            range_end=prefix_end(grant.prefix),
        )
        request = rpc.AuthRoleGrantPermissionRequest(name=role, perm=permission)
        await _ignore_exists(client, client.auth.RoleGrantPermission, request)


async def _ensure_user(client: EtcdClient, user: str, password: str, role: str) -> None:
    if user == ROOT_USER:
        await _ignore_exists(client, client.auth.RoleAdd, rpc.AuthRoleAddRequest(name=ROOT_USER))
    added = await _ignore_exists(
        client, client.auth.UserAdd, rpc.AuthUserAddRequest(name=user, password=password)
    )
    if not added:
        change = rpc.AuthUserChangePasswordRequest(name=user, password=password)
        await _ignore_exists(client, client.auth.UserChangePassword, change)
    await _ignore_exists(
        client, client.auth.UserGrantRole, rpc.AuthUserGrantRoleRequest(user=user, role=role)
    )


async def _ignore_exists(client: EtcdClient, method: Callable[..., Awaitable[Any]], request: Any) -> bool:
    """Call ``method``; False when etcd says what it would create exists already."""
    try:
        await client.unary(method, request)
    except grpc.aio.AioRpcError as exc:
        if _EXISTS in (exc.details() or ""):
            return False
        raise CoordinationError(
            f"etcd refused {type(request).__name__}: {exc.code().name}: {exc.details()}"
        ) from exc
    return True


def read_passwords(root_password_file: Path, passwords_dir: Path) -> dict[str, str]:
    """``root``'s password from its file, every other user's from ``passwords_dir/<user>``."""
    files = {ROOT_USER: root_password_file, **{user: passwords_dir / user for user in ROLES}}
    passwords = {}
    for user, path in files.items():
        try:
            passwords[user] = path.read_text(encoding="utf-8").removesuffix("\n")
        except OSError as exc:
            raise ValueError(
                f"the etcd password of {user}: cannot read {str(path)!r}: {exc.strerror}"
            ) from None
    return passwords


async def _setup(endpoints: str, passwords: Mapping[str, str]) -> None:
    client = EtcdClient(endpoints, timeout=10.0, auth=EtcdAuth(ROOT_USER, passwords[ROOT_USER]))
    try:
        await ensure_access(client, passwords)
    finally:
        await client.close()


def main() -> None:
    """Set etcd up for a deployment; exit 2 with a message when it cannot.

    Reads ``SCHEDD_ETCD_ENDPOINTS``, root's password from the file ``SCHEDD_ETCD_ROOT_PASSWORD_FILE``
    and each service user's from ``SCHEDD_ETCD_PASSWORDS_DIR/<user>`` (TLS as every etcd client:
    ``SCHEDD_ETCD_CA_FILE``...). Safe to run at every deployment.
    """
    try:
        endpoints = os.environ[ENDPOINTS_ENV]
        passwords = read_passwords(
            Path(os.environ[ROOT_PASSWORD_FILE_ENV]), Path(os.environ[PASSWORDS_DIR_ENV])
        )
        asyncio.run(_setup(endpoints, passwords))
    except KeyError as exc:
        print(f"error: {exc.args[0]} is not set", file=sys.stderr)
        sys.exit(2)
    except (ValueError, CoordinationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"etcd users {', '.join(USERS)} are set up and authentication is on")


if __name__ == "__main__":
    main()
