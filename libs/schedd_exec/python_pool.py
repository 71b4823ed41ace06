"""A pool of warm Python child processes that run ``package.module:function`` tasks.

Starting an interpreter per task costs 50-100 ms; a :class:`PythonPool` keeps
long-lived children (``python -m schedd_exec.python_child``, see
:mod:`schedd_exec.python_child`) and hands each :meth:`PythonPool.run` call to an
idle one over a pipe protocol (length-prefixed JSON; no pickle), so a no-op task
costs a couple of pipe round trips. It keeps ``warm`` children while idle and grows to ``size``
under load: a task that finds no child idle starts one and takes whichever child is idle first (a
finishing one or the new one); a child beyond ``warm`` that idles ``retire_after`` seconds is let
go. The idle are taken last-in first-out, so a light load keeps to a few children.

Guaranteed:

* A task cannot crash, hang or corrupt the worker: it runs in another process,
  in its own process group. The protocol travels on descriptors the task
  never sees as fds 0-2 (and which are close-on-exec), so nothing it prints or
  writes to fd 1/2 can corrupt it.
* ``timeout`` is enforced: the child's process group gets SIGTERM, then SIGKILL
  after ``kill_grace``; the outcome says ``execution timeout of Xs exceeded``.
* A child that dies during a task (segfault, ``os._exit``, OOM kill) gives a
  failed outcome naming the signal or exit status.
* Cancelling :meth:`PythonPool.run` kills the child running that task (SIGTERM
  at once, SIGKILL after ``kill_grace``): the task stops.
* Every child that leaves the pool (timeout, death, cancellation, recycling
  after ``recycle_after`` tasks or when it reports damaged state) is replaced,
  so the pool never falls below ``warm``; a replacement that fails to start is retried
  with backoff. It never has more than ``size`` children.
* Output: fds 1 and 2 of a child are an unlinked temporary file owned by the
  pool, truncated before each task, so everything the task writes there
  (``print``, ``logging`` to stderr, C extensions, ``os.system``) is captured,
  even when the child then dies or times out. The first and last
  ``max_output_bytes / 2`` bytes are kept, with a marker for what was cut; or, when
  :meth:`PythonPool.run` is given ``on_output``, the output is passed to it while the task runs
  (``schedd_exec.output_stream``), at most ``max_streamed_bytes`` of it.
* The return value must be JSON-serialisable and at most ``max_result_bytes``
  of JSON, or the task fails with an error naming the problem.
* With a ``reaper`` (``schedd_exec.reaper``), a child's process group is watched by the
  worker's reaper process while it runs a task (and for a refresh interval after, so that the
  child's next task needs no message: ``Reaper.release``), so it is killed if the worker dies or
  can no longer vouch for the attempt, and a child being stopped is SIGKILLed after ``kill_grace``
  even if the worker freezes meanwhile.
* :meth:`PythonPool.close` stops every child and its process group, with
  bounded waits. If the worker process dies without closing the pool, each
  child gets SIGKILL from the kernel (Linux ``PR_SET_PDEATHSIG``, which
  strictly fires when the thread that started the child exits, so run the
  pool on a long-lived event loop thread; a child
  whose parent vanishes otherwise exits when its stdin reaches EOF, after its
  current task).

Not guaranteed (the price of warm processes; a task that needs them should be a
shell task): isolation of module-level state, threads, ``sys.path`` or signal
handlers between tasks of one child (``os.environ``, the working directory and
``sys.stdout``/``sys.stderr`` are restored after each task); that a module
changed on disk is re-imported (a child imports a module once); that the
temporary output file stays small (it is on disk, only its head and tail are
read); that background threads or processes a task left behind do not write
into a later task's output of the same child (they are killed when the child
leaves the pool).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from schedd_core.limits import MAX_RESULT_BYTES
from schedd_exec.environment import TaskEnvironment
from schedd_exec.output_stream import OutputStream
from schedd_exec.python_children import (
    DRAIN_AFTER_EXIT,
    HEADER,
    KILL_WAIT,
    TIMED_OUT,
    Asker,
    Child,
    ChildKeeper,
    Exited,
    Reply,
    TimedOut,
    describe_exit,
)
from schedd_exec.reaper import Reaper

log = logging.getLogger(__name__)

#: Seconds a child beyond the pool's ``warm`` ones may idle before it is let go.
RETIRE_IDLE_AFTER = 60.0


@dataclass(frozen=True)
class PyOutcome:
    """How one Python task ended. Datetimes are timezone-aware UTC."""

    succeeded: bool
    exit_code: int
    error: str
    result_json: str
    """JSON text of the return value; "" when it returned None (or did not return)."""
    output: str
    """What the task wrote to stdout and stderr, possibly truncated with a marker."""
    started_at: datetime
    ended_at: datetime
    #: False when running the task again cannot help (its module does not import, its function
    #: is missing): the task fails without retries.
    retryable: bool = True


class PoolClosedError(RuntimeError):
    """:meth:`PythonPool.run` was called on, or was waiting for a child of, a closed pool."""


class PythonPool(ChildKeeper):
    """Between ``warm`` and ``size`` Python children; :meth:`run` runs one task in an idle one.

    Use ``await pool.start()`` ... ``await pool.close()``, or ``async with``.
    Children run with the working directory the pool was created in (which is
    on their ``sys.path``), start with ``environment`` (default: the allowed part of this
    process's environment; ``schedd_exec.environment``), never this process's whole environment,
    and run as its task user when it has one. With ``import_path`` (an unpacked code bundle,
    ``schedd_exec.bundle_pools``) that directory is first on their ``sys.path``, so every
    child of the pool imports the modules it holds from it.
    """

    def __init__(
        self,
        size: int,
        *,
        warm: int | None = None,
        retire_after: float = RETIRE_IDLE_AFTER,
        python: str = sys.executable,
        max_output_bytes: int = 64 * 1024,
        max_streamed_bytes: int = 8 * 1024 * 1024,
        max_result_bytes: int = MAX_RESULT_BYTES,
        kill_grace: float = 2.0,
        recycle_after: int = 1000,
        reaper: Reaper | None = None,
        import_path: str | None = None,
        environment: TaskEnvironment | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        warm = size if warm is None else warm
        if not 1 <= warm <= size:
            raise ValueError("warm must be at least 1 and at most size")
        if recycle_after < 1:
            raise ValueError("recycle_after must be at least 1")
        self._size = size
        self._warm = warm
        self._retire_after = retire_after
        self._starting = 0
        self._python = python
        self._max_output_bytes = max_output_bytes
        self._max_streamed_bytes = max_streamed_bytes
        self._max_result_bytes = max_result_bytes
        self._kill_grace = kill_grace
        self._recycle_after = recycle_after
        self._reaper = reaper
        self._import_path = import_path
        self._environment = (
            environment if environment is not None else TaskEnvironment.from_environ(os.environ)
        )
        self._cwd = os.getcwd()
        self._children: set[Child] = set()
        self._idle: asyncio.LifoQueue[Child | None] = asyncio.LifoQueue()
        self._background: set[asyncio.Task[Any]] = set()
        self._started = False
        self._closed = False
        self._closed_event = asyncio.Event()

    @property
    def size(self) -> int:
        return self._size

    @property
    def pids(self) -> list[int]:
        """Pids of the children in the pool now (``warm`` to ``size``; fewer while replacements start)."""
        return sorted(c.pid for c in self._children)

    async def __aenter__(self) -> PythonPool:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the warm children; raises (and leaves nothing running) if one cannot start."""
        if self._started or self._closed:
            raise RuntimeError("the pool was already started")
        self._started = True
        results = await asyncio.gather(*(self._spawn() for _ in range(self._warm)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for r in results:
            if isinstance(r, Child):
                self._children.add(r)
                self._offer(r)
        if errors:
            await self.close()
            raise errors[0]

    async def close(self) -> None:
        """Stop all children and their process groups; bounded (about ``2 * kill_grace`` at most).

        Idle children exit at once; a busy one gets ``kill_grace`` to finish its task, then SIGTERM,
        then SIGKILL after another ``kill_grace``; its ``run()`` returns a failed outcome.
        """
        if self._closed:
            return
        self._closed = True
        self._closed_event.set()
        self._idle.put_nowait(None)  # wakes the run() calls waiting for a child, one after another
        for child in list(self._children):
            child.kill_reason = "the pool was closed"
            self._discard(child, graceful=True)
        deadline = asyncio.get_running_loop().time() + 2 * self._kill_grace + KILL_WAIT + DRAIN_AFTER_EXIT
        while self._background:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            await asyncio.wait(set(self._background), timeout=left)
        for task in list(self._background):
            log.warning("python pool: a clean-up task did not finish in time; cancelling it")
            task.cancel()

    async def run(
        self,
        target: str,
        *,
        env: dict[str, str],
        timeout: float | None,
        params: dict[str, object] | None = None,
        transaction: dict[str, object] | None = None,
        on_output: Callable[[bytes], None] | None = None,
        on_ask: Asker | None = None,
    ) -> PyOutcome:
        """Run ``target`` (``package.module:function``) in an idle child, waiting for one if needed.

        ``env`` is applied on top of the child's environment for this task only;
        ``timeout`` (seconds) counts from when the task is handed to a child. With ``on_output``,
        the task's output goes there as it is written, and the outcome's ``output`` is empty.
        ``on_ask`` answers the task's questions (``schedd_exec.task_channel``); without it, none.
        """
        if not self._started:
            raise RuntimeError("the pool was not started")
        try:
            request_body: dict[str, object] = {"target": target, "env": env, "params": params}
            if transaction is not None:
                # The child runs the task in a database transaction that also records its success.
                request_body["transaction"] = transaction
            body = json.dumps(request_body, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            now = datetime.now(UTC)
            return PyOutcome(False, 1, f"params are not JSON-serialisable: {exc}", "", "", now, now)
        data = body.encode()
        request = HEADER.pack(len(data)) + data

        child = await self._acquire()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Reply] = loop.create_future()
        child.pending = fut
        child.busy = True
        child.asker = on_ask
        if self._reaper is not None:
            self._reaper.watch(child.pid)
        started = datetime.now(UTC)
        timer = None
        stream = None
        try:
            os.ftruncate(child.out_fd, 0)
            assert child.proc.stdin is not None
            child.proc.stdin.write(request)
            if on_output is not None:
                stream = OutputStream(child.out_fd, on_output, self._max_streamed_bytes)
            if timeout is not None:
                timer = loop.call_later(timeout, child.resolve, TIMED_OUT)
            reply = await fut
        except BaseException:
            if stream is not None:
                stream.stop()
            # Cancelled (or something unexpected): the task must stop.
            if self._reaper is not None:
                self._reaper.kill_at(child.pid, time.monotonic() + self._kill_grace)
            child.signal(signal.SIGTERM)
            child.kill_reason = "run() was cancelled"
            child.pending = None
            child.busy = False
            self._discard(child)
            raise
        finally:
            child.asker = None
            if timer is not None:
                timer.cancel()
        return await self._finish(child, reply, timeout, started, stream)

    def _output(self, child: Child, stream: OutputStream | None) -> str:
        """The task's output; when it is streamed, the rest of it is passed on and this is empty."""
        if stream is None:
            return child.read_output(self._max_output_bytes)
        stream.finish()
        return ""

    async def _finish(
        self,
        child: Child,
        reply: Reply,
        timeout: float | None,
        started: datetime,
        stream: OutputStream | None,
    ) -> PyOutcome:
        try:
            if isinstance(reply, dict):
                try:
                    outcome = PyOutcome(
                        succeeded=bool(reply["ok"]),
                        exit_code=int(reply["code"]),
                        error=str(reply["error"]),
                        result_json=str(reply["result"]),
                        output=self._output(child, stream),
                        started_at=started,
                        ended_at=datetime.now(UTC),
                        retryable=not reply.get("no_retry", False),
                    )
                except (KeyError, TypeError, ValueError):
                    reply = Exited(-1)
                    child.kill_reason = "protocol error"
                else:
                    child.tasks_done += 1
                    if self._reaper is not None:
                        self._reaper.release(child.pid)
                    if reply.get("recycle") or child.tasks_done >= self._recycle_after:
                        self._discard(child, graceful=True)
                    else:
                        child.busy = False
                        child.pending = None
                        self._offer(child)
                    return outcome
            # Timed out or died: make sure the process group is gone before reading its output.
            if isinstance(reply, TimedOut):
                child.kill_reason = "timeout"
            reap = self._discard(child)
            await asyncio.shield(reap)
            output = self._output(child, stream)
            ended = datetime.now(UTC)
            if isinstance(reply, TimedOut):
                return PyOutcome(
                    False, -1, f"execution timeout of {timeout}s exceeded", "", output, started, ended
                )
            code = reply.returncode
            if code == 0:  # os._exit(0): the task chose to end its process successfully
                return PyOutcome(True, 0, "", "", output, started, ended)
            reason = f" ({child.kill_reason})" if child.kill_reason else ""
            error = f"the python child process {describe_exit(code)} while running the task{reason}"
            return PyOutcome(False, code, error, "", output, started, ended)
        finally:
            if stream is not None:
                stream.stop()
            child.pending = None
            child.busy = False
            child.close_output_if_unused()

    async def _acquire(self) -> Child:
        while True:
            if self._idle.empty():
                self._grow()
            child = await self._idle.get()
            if child is None:
                self._idle.put_nowait(None)
                raise PoolClosedError("the python pool is closed")
            if child in self._children and not child.exited.is_set():
                return child

    # -- children -----------------------------------------------------------------------------
