"""The etcd users of a local stack: their passwords in files, and setting them up in etcd.

:class:`EtcdCredentials` keeps one file per user of :mod:`schedd_coord.access` in a directory of
its own (mode 0700, files 0600), each a random password made on first use and kept afterwards, so
an etcd restarted on the same data still accepts them. :meth:`EtcdCredentials.provision` creates
the users and roles in etcd and turns authentication on (idempotent).

:meth:`EtcdCredentials.service_env` is what a service started by the dev stack or the test harness
is given: ``SCHEDD_ETCD_USER`` and ``SCHEDD_ETCD_PASSWORD_FILE``. The test process itself finds the
directory in ``SCHEDD_DEVSTACK_ETCD_CREDENTIALS`` (set by the test fixtures), so a
:class:`~schedd_devstack.services.Cluster` gives each service its own user without being told.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from schedd_coord import access
from schedd_coord.client import EtcdClient
from schedd_coord.credentials import PASSWORD_FILE_ENV, USER_ENV, EtcdAuth
from schedd_devstack._process import run_coroutine_sync

#: The directory of the etcd credentials the test process and its clusters use.
CREDENTIALS_ENV = "SCHEDD_DEVSTACK_ETCD_CREDENTIALS"


class EtcdCredentials:
    """The password files of the etcd users, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @staticmethod
    def from_env(env: Mapping[str, str]) -> EtcdCredentials | None:
        """The credentials ``SCHEDD_DEVSTACK_ETCD_CREDENTIALS`` names (None when unset)."""
        directory = env.get(CREDENTIALS_ENV, "")
        return EtcdCredentials(Path(directory)) if directory else None

    def password_file(self, user: str) -> Path:
        if user not in access.USERS:
            raise ValueError(f"no etcd user {user!r}; users: {', '.join(access.USERS)}")
        return self.directory / f"{user}.password"

    def auth(self, user: str) -> EtcdAuth:
        return EtcdAuth(user, self.password_file(user).read_text(encoding="utf-8").removesuffix("\n"))

    def service_env(self, user: str) -> dict[str, str]:
        """``SCHEDD_ETCD_USER`` and ``SCHEDD_ETCD_PASSWORD_FILE`` of ``user``."""
        return {USER_ENV: user, PASSWORD_FILE_ENV: str(self.password_file(user))}

    def ensure_files(self) -> None:
        """Make a random password for every user that has none yet."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for user in access.USERS:
            path = self.password_file(user)
            if not path.exists():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(secrets.token_urlsafe(24) + "\n")

    def provision(self, endpoints: str) -> None:
        """Create the password files if needed, then the users and roles in etcd; authentication on."""
        self.ensure_files()
        passwords = {user: self.auth(user).password for user in access.USERS}

        async def setup() -> None:
            client = EtcdClient(endpoints, timeout=10.0, auth=self.auth(access.ROOT_USER))
            try:
                await access.ensure_access(client, passwords)
            finally:
                await client.close()

        run_coroutine_sync(setup)
