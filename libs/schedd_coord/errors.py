"""Errors of the coordination layer."""

from __future__ import annotations

from schedd_core.errors import FailedPrecondition, Unavailable


class CoordinationError(Unavailable):
    """etcd could not be reached or answered with an error."""


class EtcdAuthFailed(CoordinationError):
    """etcd refused the user name or password (``SCHEDD_ETCD_USER`` and its password)."""


class MalformedLeaderKey(FailedPrecondition):
    """A key of the election holds a value no scheduler writes (not a JSON object of strings).

    etcd answered; what it holds is wrong, so this is not a :class:`CoordinationError`.
    """
