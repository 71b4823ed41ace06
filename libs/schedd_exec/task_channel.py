"""A running Python task's questions to its worker (a variable, a connection), asked over the pipes
the task's process already shares with the worker (``schedd_exec.python_child``).

The task process installs the channel when it starts; :func:`ask` sends ``{"ask": kind, "name":
name}`` and blocks for the worker's answer. The worker answers each question with the registry's
answer for the attempt the process is running (``TaskSecrets.ReadSecret``), so a task can read only
what its own attempt is granted, and the worker learns every value the task reads, to mask it in the
task's log. Not available to shell tasks (they have no channel), nor outside a worker
(:class:`ChannelUnavailable`).

This module holds the process's one channel: it is the task process's runtime, set once by the child
at start-up, never by a service.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Ask = Callable[[dict[str, Any]], dict[str, Any]]

_channel: list[Ask] = []


class ChannelUnavailable(RuntimeError):
    """Not inside a Python task run by a schedd worker."""


class SecretRefused(PermissionError):
    """The worker (or the registry) refused the question; the message says why, never a value."""


def install(ask_function: Ask) -> None:
    _channel[:] = [ask_function]


def ask(kind: str, name: str) -> dict[str, Any]:
    """The worker's answer: ``{"found": bool, "value": str, "connection": {...}}``."""
    if not _channel:
        raise ChannelUnavailable(
            f"{kind} {name!r}: reading variables and connections needs a Python task run by a schedd worker"
        )
    answer = _channel[0]({"ask": kind, "name": name})
    if answer.get("error"):
        raise SecretRefused(str(answer["error"]))
    return answer
