"""The system user a local PostgreSQL runs as when this process is root (PostgreSQL refuses root).

``postgres`` when it exists, else ``schedd`` (created with ``useradd --system`` when neither
exists). :func:`ensure_traversable` adds the execute bits that user needs on the way to the data
directory and the binaries, with a warning per directory changed; nothing else is changed.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from schedd_devstack.binaries import DevstackError

_LOG = logging.getLogger("schedd_devstack.postgres")


@dataclass(frozen=True)
class Account:
    """The unprivileged system user the server runs as when we are root."""

    name: str
    uid: int
    gid: int


def service_account() -> Account:
    for name in ("postgres", "schedd"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return Account(name, entry.pw_uid, entry.pw_gid)
    useradd = shutil.which("useradd")
    if useradd is None:
        raise DevstackError(
            "running as root, PostgreSQL needs an unprivileged user, and neither `postgres` nor `schedd` "
            "exists; `useradd` is not available to create `schedd`"
        )
    result = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "schedd"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if result.returncode != 0:
        raise DevstackError(f"useradd schedd failed: {result.stderr.strip()}")
    entry = pwd.getpwnam("schedd")
    return Account("schedd", entry.pw_uid, entry.pw_gid)


def ensure_traversable(path: Path, account: Account) -> None:
    """Add the execute bit ``account`` needs on ``path`` and on each of its ancestors."""
    for directory in (path, *path.parents):
        st = directory.stat()
        if st.st_uid == account.uid:
            bit = stat.S_IXUSR
        elif st.st_gid == account.gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            _LOG.warning("making %s traversable for user %s (adding an execute bit)", directory, account.name)
            os.chmod(directory, stat.S_IMODE(st.st_mode) | bit)
