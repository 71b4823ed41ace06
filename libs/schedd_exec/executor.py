"""Running assignments concurrently: shell commands in subprocesses, Python callables in a warm pool.

Output of an attempt goes to ``on_output`` as it is read: a shell command's as it arrives, a
Python task's within ``schedd_exec.output_stream.POLL_SECONDS`` of being written.

Each attempt runs as one asyncio task keyed by its attempt id. ``cancel`` stops
an attempt (its process is terminated) and reports it abandoned, so it runs again
elsewhere; an attempt is reported exactly once, through ``on_done``.

Every attempt's process group is watched by the executor's reaper process
(``schedd_exec.reaper``); the owner of the executor tells it, through ``reaper``,
until when the attempts may run. If the reaper dies, every attempt is stopped and
a new reaper is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format

from schedd.v1 import worker_pb2
from schedd_core.arguments import ARGUMENTS_ENV
from schedd_core.database_url import asyncpg_dsn
from schedd_core.mapped_arguments import MAP_INDEX_ENV, MAPPING_ENV
from schedd_core.templates import RenderError
from schedd_exec.bundle_cache import BundleCache
from schedd_exec.bundle_pools import BundlePools
from schedd_exec.environment import TaskEnvironment
from schedd_exec.outcome import Outcome
from schedd_exec.python_pool import PythonPool
from schedd_exec.reaper import Reaper
from schedd_exec.sensor_loop import poke_until_done
from schedd_exec.shell import run_shell
from schedd_exec.templating import rendered_command
from schedd_rpc import convert

log = logging.getLogger(__name__)

OutputSink = Callable[[worker_pb2.Assignment, bytes], None]
DoneSink = Callable[[worker_pb2.Assignment, Outcome], None]
#: Answers a running task's question (a variable or a connection, by name) for its assignment.
SecretAsker = Callable[[worker_pb2.Assignment, str, str], Awaitable[dict[str, Any]]]


class AttemptExecutor:
    def __init__(
        self,
        *,
        python_workers: int,
        python_warm: int | None = None,
        kill_grace: float = 5.0,
        on_output: OutputSink | None = None,
        on_done: DoneSink,
        task_database_url: str = "",
        bundles: BundleCache | None = None,
        environment: TaskEnvironment | None = None,
        secrets: SecretAsker | None = None,
    ) -> None:
        """``environment`` is what every task process starts with and as whom it runs (default: the
        allowed part of this process's environment, as this process's user); ``secrets`` answers a
        Python task's reads of variables and connections (without it, they are refused). Each Python
        pool keeps ``python_warm`` processes while idle (default, and at most: ``python_workers``)."""
        warm = python_workers if python_warm is None else min(python_warm, python_workers)
        self._secrets = secrets
        self._kill_grace = kill_grace
        self._environment = (
            environment if environment is not None else TaskEnvironment.from_environ(os.environ)
        )
        self._task_dsn = asyncpg_dsn(task_database_url) if task_database_url else ""
        self._on_output = on_output
        self._on_done = on_done
        self.reaper = Reaper()
        self._pool = (
            PythonPool(
                python_workers,
                warm=warm,
                kill_grace=kill_grace,
                reaper=self.reaper,
                environment=self._environment,
            )
            if python_workers > 0
            else None
        )
        # A Python task of a run pinning a code bundle runs in a pool of that bundle only.
        self._bundle_pools = (
            BundlePools(
                bundles,
                lambda path: PythonPool(
                    python_workers,
                    warm=warm,
                    kill_grace=kill_grace,
                    reaper=self.reaper,
                    import_path=path,
                    environment=self._environment,
                ),
            )
            if bundles is not None and python_workers > 0
            else None
        )
        self._running: dict[str, tuple[worker_pb2.Assignment, asyncio.Task[None]]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._reaper_watch: asyncio.Task[None] | None = None

    @property
    def kill_grace(self) -> float:
        return self._kill_grace

    async def start(self) -> None:
        await self.reaper.start()
        self._reaper_watch = asyncio.create_task(self._keep_reaper(), name="reaper-watch")
        if self._pool is not None:
            await self._pool.start()

    async def close(self) -> None:
        await self.cancel_all("the executor is closing")
        if self._bundle_pools is not None:
            await self._bundle_pools.close()
        if self._pool is not None:
            await self._pool.close()
        if self._reaper_watch is not None:
            self._reaper_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper_watch
        await self.reaper.close()

    async def _keep_reaper(self) -> None:
        while True:
            code = await self.reaper.wait()
            log.error("the reaper process exited (%s); stopping every attempt and starting a new one", code)
            await self.cancel_all("the reaper process died")
            await self.reaper.start()

    async def run_callback(
        self, target: str, event: dict[str, Any], timeout: float = 60.0
    ) -> tuple[bool, str]:
        """Run a callback callable in the warm pool with the event as ``params``."""
        if self._pool is None:
            return False, "this executor runs no Python (python_workers=0)"
        out = await self._pool.run(target, env={}, timeout=timeout, params=event)
        return out.succeeded, out.error

    @property
    def running(self) -> list[worker_pb2.Assignment]:
        return [a for a, _ in self._running.values()]

    @property
    def running_count(self) -> int:
        """How many attempts run now; safe to read from another thread (a metrics scrape)."""
        return len(self._running)

    def submit(self, assignment: worker_pb2.Assignment) -> None:
        attempt_id = assignment.attempt.attempt_id
        if attempt_id in self._running:
            return
        task = asyncio.create_task(self._run(assignment), name=f"attempt-{attempt_id}")
        self._running[attempt_id] = (assignment, task)
        self._idle.clear()

    def cancel(self, attempt_id: str) -> bool:
        """Stop an attempt; it is reported abandoned. Returns whether it was running."""
        entry = self._running.get(attempt_id)
        if entry is None:
            return False
        entry[1].cancel()
        return True

    async def cancel_all(self, reason: str) -> None:
        for _, task in list(self._running.values()):
            task.cancel()
        if self._running:
            log.info("stopping %d attempts: %s", len(self._running), reason)
        await self.wait_idle(None)

    async def wait_idle(self, timeout: float | None) -> bool:
        """Wait until nothing runs; returns False if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def _run(self, assignment: worker_pb2.Assignment) -> None:
        started = datetime.now(UTC)
        try:
            if assignment.HasField("sensor"):
                outcome = await poke_until_done(assignment, self._execute)
            else:
                outcome = await self._execute(assignment)
        except asyncio.CancelledError:
            outcome = Outcome(
                False, -1, "stopped before it finished", started, datetime.now(UTC), abandoned=True
            )
        except Exception as exc:
            log.exception("attempt %s could not run", assignment.attempt.attempt_id)
            outcome = Outcome(
                False, -1, f"the worker could not run the task: {exc}", started, datetime.now(UTC)
            )
        finally:
            self._running.pop(assignment.attempt.attempt_id, None)
            if not self._running:
                self._idle.set()
        self._on_done(assignment, outcome)

    async def _execute(self, assignment: worker_pb2.Assignment) -> Outcome:
        env = dict(assignment.env)
        if assignment.upstream_results_json:
            env["SCHEDD_UPSTREAM_RESULTS"] = assignment.upstream_results_json
        if assignment.python.args or assignment.python.kwargs:  # the child resolves them
            env[ARGUMENTS_ENV] = json_format.MessageToJson(
                assignment.python, preserving_proto_field_name=True
            )
        if assignment.HasField("map_index"):  # an instance of a mapped task: the child picks its elements
            env[MAP_INDEX_ENV] = str(assignment.map_index)
            env[MAPPING_ENV] = json_format.MessageToJson(assignment.mapping, preserving_proto_field_name=True)
        timeout = (
            assignment.execution_timeout.ToTimedelta().total_seconds()
            if assignment.HasField("execution_timeout")
            else None
        )
        action = assignment.WhichOneof("action")
        sink = self._sink(assignment)
        if action == "shell":
            if assignment.HasField("params"):
                env["SCHEDD_PARAMS"] = json.dumps(convert.from_struct(assignment.params))
            try:
                command = rendered_command(assignment)
            except RenderError as exc:
                now = datetime.now(UTC)
                return Outcome(False, -1, str(exc), now, now)
            if command != assignment.shell.command and sink is not None:
                sink(f"[schedd] rendered command: {command}\n".encode())
            return await run_shell(
                command,
                env=env,
                timeout=timeout,
                kill_grace=self._kill_grace,
                on_output=sink,
                reaper=self.reaper,
                environment=self._environment,
            )
        if action == "python":
            return await self._execute_python(assignment, env, timeout, sink)
        raise ValueError("the assignment has no action")

    async def _execute_python(
        self,
        assignment: worker_pb2.Assignment,
        env: dict[str, str],
        timeout: float | None,
        sink: Callable[[bytes], None] | None,
    ) -> Outcome:
        """Run a Python task in the pool (or its code bundle's pool)."""
        if self._pool is None:
            raise RuntimeError("this executor runs no Python tasks (python_workers=0)")
        params = convert.from_struct(assignment.params) if assignment.HasField("params") else {}
        transaction = None
        if assignment.transactional:
            if not self._task_dsn:
                raise RuntimeError(
                    "a transactional task needs the metadata database: start the worker with "
                    "SCHEDD_TASK_DATABASE_URL"
                )
            transaction = {
                "dsn": self._task_dsn,
                "ti_id": assignment.attempt.task_instance_id,
                "attempt_id": assignment.attempt.attempt_id,
                "try_number": assignment.attempt.try_number,
                "secret": assignment.commit_secret,
                "started_at": datetime.now(UTC).isoformat(),
            }
        on_ask = functools.partial(self._secrets, assignment) if self._secrets is not None else None
        if assignment.code_bundle:
            if self._bundle_pools is None:
                raise RuntimeError("this executor cannot run code bundles (it has no bundle cache)")
            py = await self._bundle_pools.run(
                assignment.code_bundle,
                assignment.python.target,
                env=env,
                timeout=timeout,
                params=params,
                transaction=transaction,
                on_output=sink,
                on_ask=on_ask,
            )
        else:
            py = await self._pool.run(
                assignment.python.target,
                env=env,
                timeout=timeout,
                params=params,
                transaction=transaction,
                on_output=sink,
                on_ask=on_ask,
            )
        return Outcome(
            py.succeeded,
            py.exit_code,
            py.error,
            py.started_at,
            py.ended_at,
            result_json=py.result_json,
            no_retry=not py.retryable,
        )

    def _sink(self, assignment: worker_pb2.Assignment) -> Callable[[bytes], None] | None:
        on_output = self._on_output
        if on_output is None:
            return None

        def sink(data: bytes) -> None:
            with contextlib.suppress(Exception):
                on_output(assignment, data)

        return sink
