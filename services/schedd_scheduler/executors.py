"""Where queued task instances run, chosen by configuration behind one interface.

- ``distributed`` (the default): registries hand them to workers; the scheduler runs nothing.
- ``local``: this scheduler process claims queued task instances itself and runs them in a
  bounded pool of subprocesses on its own machine. No registry or worker is needed.
- ``sequential``: ``local`` with one task at a time, for debugging.

The local executors use the same claims (``FOR UPDATE SKIP LOCKED``), attempt-conditional
results, heartbeats and logs as workers do, so every guarantee holds the same way: several
scheduler replicas with local executors never run one attempt twice, and an attempt of a
crashed replica is failed over like any lost attempt. A local executor is a worker without a
liveness lease (``local.<scheduler id>``): its attempts run only while its own heartbeats get
stored (``schedd_core.permits``), and its reaper kills them if the scheduler freezes or dies.
Its tasks start with an allow-list of the scheduler's environment, as its task user when it has
one (``schedd_exec.environment``), never with the scheduler's database URL.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Protocol

from schedd_core.permits import AttemptWindows
from schedd_store.database import Engine

if TYPE_CHECKING:
    from schedd_exec.environment import TaskEnvironment


class ExecutorKind(enum.StrEnum):
    DISTRIBUTED = "distributed"
    LOCAL = "local"
    SEQUENTIAL = "sequential"


class Executor(Protocol):
    def wake(self, _payload: str = "") -> None:
        """Task instances were queued."""

    async def run(self) -> None:
        """Run until cancelled."""


class DistributedExecutor:
    """Registries and workers run the tasks; nothing to do in the scheduler."""

    def wake(self, _payload: str = "") -> None:
        pass

    async def run(self) -> None:
        await asyncio.Event().wait()


def make_executor(
    kind: ExecutorKind,
    engine: Engine,
    *,
    identity: str,
    parallelism: int,
    silence_limit: float,
    task_database_url: str = "",
    environment: TaskEnvironment | None = None,
) -> Executor:
    if kind is ExecutorKind.DISTRIBUTED:
        return DistributedExecutor()
    # Here, not at the top: a distributed scheduler never loads the task runtime.
    from schedd_scheduler.local_executor import LocalExecutor

    return LocalExecutor(
        engine,
        identity=identity,
        parallelism=1 if kind is ExecutorKind.SEQUENTIAL else parallelism,
        windows=AttemptWindows.for_silence_limit(silence_limit),
        task_database_url=task_database_url,
        environment=environment,
    )
