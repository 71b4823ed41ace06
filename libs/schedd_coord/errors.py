"""Errors of the coordination layer."""

from __future__ import annotations

from schedd_core.errors import Unavailable


class CoordinationError(Unavailable):
    """etcd could not be reached or answered with an error."""


class LeaseLost(CoordinationError):
    """The lease expired, was revoked, or could not be renewed in time."""
