"""The credentials a service authenticates to etcd with, read once from its settings.

``SCHEDD_ETCD_USER`` names the etcd user; its password is ``SCHEDD_ETCD_PASSWORD`` or the content
of the file ``SCHEDD_ETCD_PASSWORD_FILE`` (one trailing newline dropped). Without a user, a service
talks to etcd without authenticating (an etcd with authentication on then refuses every call).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

USER_ENV = "SCHEDD_ETCD_USER"
PASSWORD_ENV = "SCHEDD_ETCD_PASSWORD"
PASSWORD_FILE_ENV = "SCHEDD_ETCD_PASSWORD_FILE"


@dataclass(frozen=True)
class EtcdAuth:
    """An etcd user and its password (the password is left out of ``repr``)."""

    user: str
    password: str = field(repr=False)


def read_etcd_auth(env: Mapping[str, str]) -> EtcdAuth | None:
    """The credentials ``env`` gives (None without ``SCHEDD_ETCD_USER``).

    Raises ValueError naming the variable: a user without a password, a password without a user,
    both ``SCHEDD_ETCD_PASSWORD`` and ``SCHEDD_ETCD_PASSWORD_FILE``, a file that cannot be read, or
    an empty password.
    """
    user = env.get(USER_ENV, "")
    password = env.get(PASSWORD_ENV, "")
    path = env.get(PASSWORD_FILE_ENV, "")
    if password and path:
        raise ValueError(f"set {PASSWORD_ENV} or {PASSWORD_FILE_ENV}, not both")
    if path:
        try:
            password = Path(path).read_text(encoding="utf-8").removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{PASSWORD_FILE_ENV}: cannot read {path!r}: {exc}") from None
        if not password:
            raise ValueError(f"{PASSWORD_FILE_ENV}: {path!r} is empty")
    if not user:
        if password:
            raise ValueError(f"{USER_ENV} is needed with the etcd password")
        return None
    if not password:
        raise ValueError(f"{USER_ENV} is set but neither {PASSWORD_ENV} nor {PASSWORD_FILE_ENV} is")
    return EtcdAuth(user, password)
