"""The environment a task starts with: an allow-list of the runner's variables, never all of them.

A task process (a shell command, a warm Python child) does not inherit the environment of the
worker or scheduler that runs it. It starts with:

1. the variables of the runner's environment that :data:`ALLOWED` names or whose name begins with
   one of :data:`ALLOWED_PREFIXES` -- what a program needs to find its tools, its interpreter and
   its locale: ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TZ``, ``TMPDIR``, ``USER``, ``LOGNAME``,
   ``SHELL``, ``TERM``, the interpreter's ``PYTHONPATH``/``PYTHONHOME``/``VIRTUAL_ENV`` and its
   output settings, ``LD_LIBRARY_PATH`` and the CA bundle (``SSL_CERT_FILE``/``SSL_CERT_DIR``);
2. the variables the operator allows on top with ``SCHEDD_TASK_ENV_ALLOW`` (names, or prefixes as
   ``PREFIX_*``, separated by commas or spaces), for instance ``AWS_REGION,MYCOMPANY_*``;
3. with a task user (``schedd_exec.task_user``), that user's ``HOME``, ``USER`` and ``LOGNAME``;
4. per attempt, what schedd sets (``SCHEDD_DAG_ID``, ``SCHEDD_ATTEMPT_ID``...; see
   ``schedd_exec.assignments``) and the task's own ``env`` from its spec.

``SCHEDD_*`` variables of the runner (database URLs, tokens, TLS files, fault points) never pass,
whatever the allow-list says: an allow-list entry starting with ``SCHEDD_``, or one that would pass
everything (``*``), is refused. So a token an operator's shell left in the worker's environment
(``SCHEDCTL_TOKEN``, cloud credentials) reaches no task unless the operator allows it by name.
Transactional tasks get their database connection from the executor, never from the environment.

Not guaranteed: that an allowed variable holds no secret (``PYTHONPATH`` or ``PATH`` naming a
directory is the operator's choice), nor anything about what a task does with its own ``env``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from schedd_exec.deathsig import death_signal_prefix
from schedd_exec.task_user import TaskUser, resolve_task_user

OWN_PREFIX = "SCHEDD_"
ALLOW_SETTING = "SCHEDD_TASK_ENV_ALLOW"
ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONWARNINGS",
        "PYTHONFAULTHANDLER",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)
ALLOWED_PREFIXES = ("LC_",)
_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


@dataclass(frozen=True)
class AllowList:
    """Variable names and name prefixes that pass from the runner's environment to its tasks."""

    names: frozenset[str] = ALLOWED
    prefixes: tuple[str, ...] = ALLOWED_PREFIXES

    @classmethod
    def with_operator_entries(cls, setting: str) -> AllowList:
        """The default list plus ``setting`` (``SCHEDD_TASK_ENV_ALLOW``); ValueError names a bad entry."""
        names, prefixes = set(ALLOWED), list(ALLOWED_PREFIXES)
        for entry in setting.replace(",", " ").split():
            if not _ENTRY.fullmatch(entry):
                raise ValueError(
                    f"{ALLOW_SETTING}: {entry!r} is neither a variable name nor a prefix ending in '*'"
                )
            if entry.upper().startswith(OWN_PREFIX):
                raise ValueError(f"{ALLOW_SETTING}: {entry!r}: schedd's own settings never pass to tasks")
            if entry.endswith("*"):
                prefixes.append(entry[:-1])
            else:
                names.add(entry)
        return cls(frozenset(names), tuple(prefixes))

    def allows(self, name: str) -> bool:
        if name.startswith(OWN_PREFIX):
            return False
        return name in self.names or name.startswith(self.prefixes)


@dataclass(frozen=True)
class TaskEnvironment:
    """What every task process of one executor starts with, and as whom it runs."""

    variables: Mapping[str, str] = field(default_factory=dict)
    user: TaskUser | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], user: TaskUser | None = None) -> TaskEnvironment:
        """The allowed part of ``environ`` (its ``SCHEDD_TASK_ENV_ALLOW`` included), as ``user`` when given.

        Raises ValueError naming a bad ``SCHEDD_TASK_ENV_ALLOW`` entry.
        """
        allow = AllowList.with_operator_entries(environ.get(ALLOW_SETTING, ""))
        variables = {key: value for key, value in environ.items() if allow.allows(key)}
        if user is not None:
            variables.update(HOME=user.home, USER=user.name, LOGNAME=user.name)
        return cls(MappingProxyType(variables), user)

    @classmethod
    def for_runner(cls, environ: Mapping[str, str], task_user: str = "") -> TaskEnvironment:
        """:meth:`from_environ` as the user named ``task_user`` (none: the runner's own).

        Raises ValueError naming the setting: a bad allow-list entry, or a task user that cannot be
        used (``schedd_exec.task_user.resolve_task_user``).
        """
        return cls.from_environ(environ, resolve_task_user(task_user) if task_user else None)

    def for_attempt(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment of one attempt's process: this one with the attempt's ``env`` on top."""
        return {**self.variables, **env}

    def command_prefix(self, *, death_signal: bool) -> tuple[str, ...]:
        """The argv prefix that starts a task process as its user, and with ``death_signal`` makes it
        die with its parent (``schedd_exec.deathsig``; where that is unavailable, without)."""
        if self.user is not None:
            return self.user.command_prefix(death_signal=death_signal)
        return death_signal_prefix() if death_signal else ()
