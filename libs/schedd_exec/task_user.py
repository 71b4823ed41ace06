"""The user a worker runs its tasks as (``--task-user`` / ``SCHEDD_TASK_USER``).

A worker started as root can run every task process (shell commands and the warm Python children)
under another user's uid, primary gid and supplementary groups. Such a task cannot read the
worker's environment, memory or files: its uid differs, and the worker is non-dumpable besides
(``schedd_exec.process_secrets``). The change of user is made by ``setpriv`` (util-linux), which
the task's program is started under (``setpriv --reuid --regid --init-groups -- PROGRAM``), as
for the death signal (``schedd_exec.deathsig``): nothing runs between fork and exec, neither
Python code nor the ``fork`` handlers of the worker's libraries (a ``subprocess`` that changes
user itself must ``fork``, and gRPC's handlers abort such a child now and then). The real,
effective and saved ids all change, so a task cannot change back.

Refused at start-up, with a message naming the setting: a worker that is not root (it could not
change user), a user that does not exist, root itself (no separation at all), and a machine
without ``setpriv``.

Not guaranteed: that the user can reach what its tasks need (the worker's working directory, the
interpreter, the unpacked code bundles); that files the tasks write are readable by the worker's
user afterwards.
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass

SETTING = "SCHEDD_TASK_USER"


class TaskUserError(ValueError):
    """The task user cannot be used; the message names the setting and the reason."""


@dataclass(frozen=True)
class TaskUser:
    name: str
    uid: int
    #: its primary group; its supplementary groups are set from the group database at each start
    gid: int
    home: str
    setpriv: str = "setpriv"

    def command_prefix(self, *, death_signal: bool) -> tuple[str, ...]:
        """The argv prefix that runs a program as this user (and, with ``death_signal``, gets it
        SIGKILL when its parent dies: set after the change of user, which would clear it)."""
        deathsig = ("--pdeathsig", "KILL") if death_signal else ()
        return (self.setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", *deathsig, "--")


def resolve_task_user(name: str, *, euid: int | None = None) -> TaskUser:
    """The user ``name`` (a name or a numeric uid) as a :class:`TaskUser`; raises :class:`TaskUserError`."""
    effective = os.geteuid() if euid is None else euid
    if effective != 0:
        raise TaskUserError(
            f"{SETTING}={name!r} needs a worker started as root, to run tasks as that user; this one "
            f"runs as uid {effective}"
        )
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        raise TaskUserError(f"{SETTING}: no such user {name!r} on this machine") from None
    if entry.pw_uid == 0:
        raise TaskUserError(f"{SETTING}={name!r} is root: tasks would run with every privilege")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise TaskUserError(f"{SETTING}={name!r} needs setpriv (util-linux), which is not installed")
    return TaskUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, setpriv)
