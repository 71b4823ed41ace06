"""Password logins of a local PostgreSQL (:class:`~schedd_devstack.postgres.LocalPostgres`).

Every connection, over the Unix socket or loopback TCP, authenticates with ``scram-sha-256``: the
cluster's ``pg_hba.conf`` is written here with no ``trust`` line (nor ``peer``, which would let any
process of the server's system user in). The owner (``schedd``, the superuser) gets a generated
password kept in ``base_dir/postgres-password`` (created 0600, never written through an existing
file); its URL carries it. The password is set in single-user mode, before the server first listens
with these rules, so no moment serves ``trust``; a data directory made before passwords existed
gets one the same way at its next start.

The task role's password (:func:`task_password`) is derived from the owner's: the role is one of the
whole server, shared by every database and every cluster using it, and each of them must compute
the same password from the URL it has, without a file of its own. Knowing the task password tells
nothing of the owner's (HMAC-SHA-256).

Not guaranteed: secrecy from root or from the owner of ``base_dir``, nor from a process that can
read the environment of the services (they receive the URLs).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import subprocess
from pathlib import Path

from schedd_devstack.binaries import DevstackError
from schedd_devstack.credentials import write_secret

PASSWORD_FILE = "postgres-password"

#: Every local and loopback connection, every database and user: a password, checked by SCRAM.
HBA_RULES = (
    "# Written by schedd_devstack: password (SCRAM) logins only; no trust, no peer.\n"
    "local   all   all                  scram-sha-256\n"
    "host    all   all   127.0.0.1/32   scram-sha-256\n"
    "host    all   all   ::1/128        scram-sha-256\n"
)
_SINGLE_USER_TIMEOUT = 120.0


def owner_password(base_dir: Path) -> tuple[str, bool]:
    """The owner's password kept under ``base_dir``, and whether it was made just now."""
    path = base_dir / PASSWORD_FILE
    try:
        return path.read_text().strip(), False
    except FileNotFoundError:
        password = secrets.token_hex(24)
        write_secret(path, password + "\n")
        return password, True


def serves_other_rules(data_dir: Path) -> bool:
    """Whether the cluster's ``pg_hba.conf`` is not (yet) :data:`HBA_RULES`."""
    try:
        return (data_dir / "pg_hba.conf").read_text() != HBA_RULES
    except FileNotFoundError:
        return True


def set_owner_password(
    postgres: Path,
    data_dir: Path,
    user: str,
    password: str,
    run_as: tuple[int, int] | None,
    env: dict[str, str],
) -> None:
    """Set ``user``'s password in single-user mode (the server must not be running), then write
    :data:`HBA_RULES`. The password travels on standard input, never on a command line."""
    statement = f"ALTER ROLE \"{user}\" WITH PASSWORD '{password}';\n"
    result = subprocess.run(
        [
            str(postgres),
            "--single",
            "-D",
            str(data_dir),
            "-c",
            "password_encryption=scram-sha-256",
            "postgres",
        ],
        input=statement,
        capture_output=True,
        text=True,
        timeout=_SINGLE_USER_TIMEOUT,
        check=False,
        cwd="/",
        env=env,
        user=None if run_as is None else run_as[0],
        group=None if run_as is None else run_as[1],
        extra_groups=None if run_as is None else [],
    )
    if result.returncode != 0 or "ERROR:" in result.stdout + result.stderr:
        raise DevstackError(
            f"setting the password of {user!r} in single-user mode failed (exit {result.returncode}): "
            f"{result.stderr.strip()[-2000:]}"
        )
    hba = data_dir / "pg_hba.conf"
    hba.write_text(HBA_RULES)
    if run_as is not None:
        os.chown(hba, *run_as)


def task_password(owner: str, role: str) -> str:
    """The password of the task login ``role`` on a server whose owner's password is ``owner``."""
    return hmac.new(owner.encode(), f"schedd task role {role}".encode(), hashlib.sha256).hexdigest()
