"""Local etcd and PostgreSQL servers for development and tests (``make run``, pytest fixtures).

Real server processes on 127.0.0.1 with their data under a directory you
choose; nothing here is meant for production. See :mod:`schedd_devstack.postgres`
and :mod:`schedd_devstack.etcd` for what each starter guarantees, and
:mod:`schedd_devstack.binaries` for where the server binaries come from.
"""

from schedd_devstack.binaries import DevstackError
from schedd_devstack.etcd import LocalEtcd
from schedd_devstack.postgres import LocalPostgres
from schedd_devstack.stack import DevStack

__all__ = ["DevStack", "DevstackError", "LocalEtcd", "LocalPostgres"]
