"""Start a local PostgreSQL and etcd together: the backing services of ``make run``.

``DevStack`` is a synchronous context manager. Entering it starts PostgreSQL,
then etcd; leaving it (normally, on an exception or on KeyboardInterrupt) stops
both. If either fails to start, whatever did start is stopped before the error
propagates. Without a ``base_dir`` the data lives in a fresh temporary
directory that is deleted on stop; with one, the data is kept there and reused
by the next start. etcd runs with authentication on (``LocalEtcd(auth=True)``): its users'
passwords are files in ``base_dir/etcd-credentials``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from schedd_coord.access import ROOT_USER
from schedd_devstack.etcd import LocalEtcd
from schedd_devstack.etcd_access import CREDENTIALS_ENV
from schedd_devstack.postgres import LocalPostgres

DATABASE_URL_ENV = "SCHEDD_DATABASE_URL"
ETCD_ENDPOINTS_ENV = "SCHEDD_ETCD_ENDPOINTS"


def make_base_dir(prefix: str = "schedd-") -> Path:
    """A new empty directory under the system temp dir, mode 0755.

    0755 (not mkdtemp's 0700) so that, when we are root, the unprivileged user
    PostgreSQL runs as can reach the data directory inside it.
    """
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path


class DevStack:
    """A PostgreSQL server and an etcd member for local runs; see the module docstring."""

    def __init__(
        self,
        base_dir: Path | None = None,
        *,
        durable: bool = True,
        postgres_settings: Mapping[str, str] | None = None,
    ) -> None:
        """``postgres_settings``: server settings PostgreSQL starts with besides the stack's own."""
        self._requested_dir = base_dir
        self._durable = durable
        self._base_dir: Path | None = None
        self._owns_dir = False
        self.postgres = LocalPostgres(settings=postgres_settings)
        self.etcd = LocalEtcd(auth=True)

    @property
    def base_dir(self) -> Path:
        """Where both servers keep data and logs (``postgres.log``, ``etcd.log``). Set by ``start``."""
        if self._base_dir is None:
            raise RuntimeError("DevStack has not been started")
        return self._base_dir

    def start(self) -> None:
        """Start PostgreSQL then etcd and wait until both serve; on any failure stop both and re-raise."""
        if self._requested_dir is not None:
            self._base_dir = Path(self._requested_dir).resolve()
            self._base_dir.mkdir(parents=True, exist_ok=True)
            self._owns_dir = False
        else:
            self._base_dir = make_base_dir("schedd-devstack-")
            self._owns_dir = True
        try:
            self.postgres.start(self._base_dir, durable=self._durable)
            self.etcd.start(self._base_dir, durable=self._durable)
        except BaseException:
            self.stop(keep_dir=True)
            raise

    def stop(self, *, keep_dir: bool = False) -> None:
        """Stop etcd and PostgreSQL (each bounded, see their ``stop``). Idempotent.

        A temporary base directory is deleted unless ``keep_dir``; one passed to
        the constructor is always kept.
        """
        try:
            self.etcd.stop()
        finally:
            try:
                self.postgres.stop()
            finally:
                if self._owns_dir and not keep_dir and self._base_dir is not None:
                    shutil.rmtree(self._base_dir, ignore_errors=True)

    def env(self) -> dict[str, str]:
        """``SCHEDD_DATABASE_URL`` and ``SCHEDD_ETCD_ENDPOINTS``; etcd's ``root`` for tools
        (``SCHEDD_ETCD_USER``, ``SCHEDD_ETCD_PASSWORD_FILE``); and where every etcd user's password
        is, for a Cluster and the tests (``SCHEDD_DEVSTACK_ETCD_CREDENTIALS``)."""
        env = {DATABASE_URL_ENV: self.postgres.url, ETCD_ENDPOINTS_ENV: self.etcd.endpoint}
        credentials = self.etcd.credentials
        if credentials is not None:
            env.update(credentials.service_env(ROOT_USER))
            env[CREDENTIALS_ENV] = str(credentials.directory)
        return env

    def dead(self) -> list[str]:
        """Names of the servers that were started and have exited since (empty while all is well)."""
        return [
            name
            for name, server in (("postgres", self.postgres), ("etcd", self.etcd))
            if server.pid is not None and not server.running
        ]

    def __enter__(self) -> DevStack:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
