"""Keeping a service's secrets out of reach of the task code it runs (and of its neighbours).

A schedd service reads its secrets (tokens, database URLs, passwords) once, at start-up, from its
environment or from a file, then calls :func:`protect_secrets`, which

* refuses a secret given as a command-line flag (exit status 2, naming the variable to use instead):
  ``/proc/<pid>/cmdline`` is readable by every user of the machine;
* makes the process *non-dumpable* (Linux ``prctl(PR_SET_DUMPABLE, 0)``): from then on a process of
  the same user that lacks ``CAP_SYS_PTRACE`` can neither open ``/proc/<pid>/environ`` nor
  ``/proc/<pid>/mem``, nor ptrace it, and the process leaves no core dump;
* removes the variables from ``os.environ``, so no process it starts later inherits them.

Why not also re-execute without them: ``os.environ`` changes do not change ``/proc/<pid>/environ``
(the block the process started with), but that block, like the rest of the process's memory, is
exactly what non-dumpable puts out of reach; a re-exec would hide the block and nothing else.

Not guaranteed: anything against root (or ``CAP_SYS_PTRACE``), which reads every process; a
secret's *file* stays as readable as its permissions make it (a token file the worker's user may
read, a task of the same user may read: run tasks as another user, ``schedd_exec.task_user``).
Elsewhere than Linux the process stays dumpable and a warning says so; the variables are still
removed. Tasks never inherit a service's environment anyway (``schedd_exec.environment``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable, MutableMapping, Sequence

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def make_undumpable() -> bool:
    """Make this process non-dumpable; False where that is not possible (not Linux, prctl failed)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False
        return bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def secret_flags_given(argv: Sequence[str], flags: Iterable[str]) -> list[str]:
    """Which of ``flags`` (``--database-url``...) appear in ``argv``, as ``--flag`` or ``--flag=...``."""
    wanted = set(flags)
    return sorted({arg.partition("=")[0] for arg in argv[1:] if arg.partition("=")[0] in wanted})


def forget(environ: MutableMapping[str, str], names: Iterable[str]) -> None:
    """Remove ``names`` from ``environ`` (those present)."""
    for name in names:
        environ.pop(name, None)


def refuse_secret_flags(service: str, flags: dict[str, str], argv: Sequence[str] | None = None) -> None:
    """End the process (exit status 2, naming the variable to use) when one of ``flags`` (flag -> its
    variable) is on the command line (default: ``sys.argv``)."""
    given = secret_flags_given(sys.argv if argv is None else argv, flags)
    if given:
        names = ", ".join(f"{flag} (use {flags[flag]})" for flag in given)
        print(
            f"{service}: a secret must not be given on the command line, which every local user can "
            f"read: {names}",
            file=sys.stderr,
        )
        raise SystemExit(2)


def protect_secrets(
    service: str,
    variables: Iterable[str],
    flags: dict[str, str] | None = None,
    *,
    environ: MutableMapping[str, str] | None = None,
) -> None:
    """Call once the secrets are read: refuse ``flags`` on the command line (see
    :func:`refuse_secret_flags`), make this process non-dumpable, remove ``variables`` from the
    environment."""
    refuse_secret_flags(service, flags or {})
    if not make_undumpable():
        log.warning(
            "%s: cannot make this process non-dumpable on %s: processes of the same user can read its "
            "memory and environment",
            service,
            sys.platform,
        )
    forget(os.environ if environ is None else environ, variables)
