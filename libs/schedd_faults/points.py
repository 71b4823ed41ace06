"""Fault-injection points: a test stops, kills or slows a service at the exact moment that matters.

A service is built with a :class:`FaultPoints`. It is inert (every ``hit`` returns at once)
unless the process was started with ``SCHEDD_FAULTS=<directory>``. A test *arms* a point by
writing the file ``<directory>/<point>`` whose content is the action:

- ``stop``: the process sends itself SIGSTOP (frozen, as by a debugger or a VM pause),
- ``kill``: the process sends itself SIGKILL,
- ``sleep <seconds>``: the calling thread blocks (an event loop that does not yield, a GC pause),
- ``fail``: :class:`InjectedFault` is raised at the point.

Each arming fires once: the first process to pass the point takes the file (an atomic rename,
so of several processes sharing the directory exactly one fires) and, before acting, writes
``<directory>/<point>.hit`` with its pid, so the test knows the point was reached and by whom. The
marker appears by a rename too: once it exists it holds the whole pid.

What this is not: a way to configure behaviour in production. Points cost nothing when the
environment variable is unset, and an unarmed point costs one failed ``rename`` system call.
Arming is the tests' side and lives with the test harness (``schedd_devstack.faults.arm``), which
production installs do not have.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

ENV = "SCHEDD_FAULTS"


class InjectedFault(RuntimeError):
    """Raised at a point armed with ``fail``."""


class FaultPoints:
    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._dir = Path(directory) if directory else None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FaultPoints:
        return cls(env.get(ENV) or None)

    @property
    def enabled(self) -> bool:
        return self._dir is not None

    def hit(self, point: str) -> None:
        """Pass the point: act if a test armed it, else return at once."""
        if self._dir is None:
            return
        armed = self._dir / point
        taken = self._dir / f"{point}.taken.{os.getpid()}"
        try:
            os.rename(armed, taken)
        except FileNotFoundError:
            return
        action = taken.read_text().strip()
        taken.unlink()
        self._mark_hit(point)
        verb, _, argument = action.partition(" ")
        if verb == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif verb == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif verb == "sleep":
            time.sleep(float(argument))
        elif verb == "fail":
            raise InjectedFault(f"fault injected at {point}")
        else:
            raise ValueError(f"unknown fault action {action!r} at {point}")

    def _mark_hit(self, point: str) -> None:
        """Write ``<point>.hit`` with this pid so that it never exists without its content.

        The marker is written under a private name and renamed into place: a test that polls for
        the marker and then reads it always reads the whole pid, never an empty file.
        """
        assert self._dir is not None
        pending = self._dir / f"{point}.hit.{os.getpid()}"
        pending.write_text(str(os.getpid()))
        os.rename(pending, self._dir / f"{point}.hit")
