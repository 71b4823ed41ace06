"""The children of a :class:`~schedd_exec.python_pool.PythonPool`: starting one, reading its replies,
noticing its exit, and taking it out of the pool (stopping it and starting a replacement).

:class:`ChildKeeper` is the pool's base: it keeps the set of children and their background tasks;
the pool (``python_pool``) hands tasks to them. What is guaranteed about children (process groups,
bounded stops, replacement with backoff, output capture) is listed in :mod:`schedd_exec.python_pool`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import struct
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from schedd_exec.environment import TaskEnvironment
from schedd_exec.reaper import Reaper

log = logging.getLogger("schedd_exec.python_pool")

START_TIMEOUT = 30.0
"""Seconds a new child has to say it is ready."""
DRAIN_AFTER_EXIT = 0.5
KILL_WAIT = 5.0
HEADER = struct.Struct(">I")


class TimedOut:
    pass


@dataclass(frozen=True)
class Exited:
    returncode: int


Reply = dict[str, Any] | Exited | TimedOut
TIMED_OUT = TimedOut()


class Child:
    """One child process and the parent's ends of its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process, out_fd: int, reader: asyncio.StreamReader) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.out_fd = out_fd
        self.reader = reader
        self.reply_transport: asyncio.BaseTransport | None = None
        self.pending: asyncio.Future[Reply] | None = None
        self.busy = False
        self.tasks_done = 0
        self.exited = asyncio.Event()
        self.returncode: int | None = None
        self.kill_reason = ""
        self.reader_task: asyncio.Task[None] | None = None
        self.watch_task: asyncio.Task[None] | None = None
        self.reap_task: asyncio.Task[None] | None = None
        #: Answers the running task's questions (``schedd_exec.task_channel``); None: none allowed.
        self.asker: Asker | None = None
        #: When it last became idle (loop time), and the timer that may let it go then.
        self.idle_since = 0.0
        self.retire_timer: asyncio.TimerHandle | None = None
        self._out_closed = False

    def signal(self, sig: signal.Signals) -> None:
        """Signal the child's process group (the child leads it)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def resolve(self, value: Reply) -> None:
        fut = self.pending
        if fut is not None and not fut.done():
            fut.set_result(value)

    def close_output_if_unused(self) -> None:
        if not self._out_closed and not self.busy and self.reap_task is not None and self.reap_task.done():
            self._out_closed = True
            os.close(self.out_fd)

    def read_output(self, limit: int) -> str:
        size = os.fstat(self.out_fd).st_size
        if size == 0:
            return ""
        if size <= limit:
            return os.pread(self.out_fd, size, 0).decode(errors="replace")
        head = limit // 2
        tail = limit - head
        first = os.pread(self.out_fd, head, 0).decode(errors="replace")
        last = os.pread(self.out_fd, tail, size - tail).decode(errors="replace") if tail else ""
        return f"{first}\n[... {size - limit} bytes of output truncated ...]\n{last}"


def output_file() -> int:
    fd, path = tempfile.mkstemp(prefix="schedd-pychild-", suffix=".out")
    os.unlink(path)
    # O_APPEND: after the pool truncates the file, every writer starts again at offset 0.
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return fd


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with status {returncode}"


Asker = Callable[[str, str], Awaitable[dict[str, Any]]]


async def _answer(child: Child, question: dict[str, Any]) -> None:
    """Answer a task's question on its request pipe; an error answer when no one may answer it."""
    asker = child.asker
    try:
        if asker is None:
            answer: dict[str, Any] = {"error": "this task cannot ask its worker anything"}
        else:
            answer = await asker(str(question.get("ask", "")), str(question.get("name", "")))
    except Exception as exc:
        answer = {"error": str(exc) or type(exc).__name__}
    data = json.dumps(answer, separators=(",", ":")).encode()
    if child.proc.stdin is not None and not child.exited.is_set():
        child.proc.stdin.write(HEADER.pack(len(data)) + data)


class ChildKeeper:
    """The children of a pool and their lifecycle; the pool's ``__init__`` sets these attributes."""

    _python: str
    _max_result_bytes: int
    _kill_grace: float
    _reaper: Reaper | None
    _import_path: str | None
    _environment: TaskEnvironment
    _cwd: str
    _children: set[Child]
    _idle: asyncio.LifoQueue[Child | None]
    _background: set[asyncio.Task[Any]]
    _closed: bool
    _closed_event: asyncio.Event
    #: Children at most; at least ``_warm`` are kept, the others go after ``_retire_after`` idle.
    _size: int
    _warm: int
    _retire_after: float
    #: Children being started (replacements and growth).
    _starting: int

    def _spawn_task(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _spawn(self) -> Child:
        loop = asyncio.get_running_loop()
        out_fd = output_file()
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._environment.command_prefix(death_signal=False),
                self._python,
                "-m",
                "schedd_exec.python_child",
                "--reply-fd",
                str(write_fd),
                "--max-result-bytes",
                str(self._max_result_bytes),
                "--parent-pid",
                str(os.getpid()),
                *(("--import-path", self._import_path) if self._import_path else ()),
                stdin=asyncio.subprocess.PIPE,
                stdout=out_fd,
                stderr=out_fd,
                pass_fds=(write_fd,),
                cwd=self._cwd,
                env=self._environment.for_attempt({}),
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            os.close(out_fd)
            raise
        finally:
            os.close(write_fd)
        reader = asyncio.StreamReader()
        child = Child(proc, out_fd, reader)
        child.busy = True
        ready: asyncio.Future[Reply] = loop.create_future()
        child.pending = ready
        try:
            # Wrapping a pipe descriptor does not block; the transport closes it.
            pipe = open(read_fd, "rb", buffering=0)  # noqa: ASYNC230, SIM115
        except BaseException:
            os.close(read_fd)
            raise
        child.reader_task = self._spawn_task(self._read_replies(child, pipe))
        child.watch_task = self._spawn_task(self._watch(child))
        try:
            reply = await asyncio.wait_for(ready, START_TIMEOUT)
            if not (isinstance(reply, dict) and reply.get("ready") == proc.pid):
                raise RuntimeError(f"unexpected first message from the python child: {reply!r}")
        except BaseException as exc:
            child.kill_reason = "start-up failed"
            reap = self._discard(child)
            try:
                await asyncio.shield(reap)
                output = child.read_output(4000).strip()
            finally:
                child.busy = False
                child.close_output_if_unused()
            if isinstance(exc, TimeoutError):
                raise RuntimeError(f"the python child did not start in {START_TIMEOUT}s: {output}") from None
            if isinstance(exc, Exception):
                raise RuntimeError(f"the python child failed to start: {exc}; output: {output}") from exc
            raise
        child.pending = None
        child.busy = False
        return child

    async def _read_replies(self, child: Child, pipe: Any) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(child.reader), pipe)
        child.reply_transport = transport
        reader = child.reader
        try:
            while True:
                (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
                message = json.loads(await reader.readexactly(size))
                if not isinstance(message, dict):
                    raise ValueError("a reply is not a JSON object")
                if "ask" in message:
                    self._spawn_task(_answer(child, message))
                else:
                    child.resolve(message)
        except asyncio.IncompleteReadError:
            pass  # EOF: the child exited (or closed its end)
        except (ValueError, OSError) as exc:
            log.error("python child %d: bad reply (%s); killing it", child.pid, exc)
        finally:
            transport.close()
        # No more replies can come: a live child is useless.
        if not child.exited.is_set():
            child.kill_reason = child.kill_reason or "its reply pipe closed"
            child.signal(signal.SIGKILL)

    async def _watch(self, child: Child) -> None:
        returncode = await child.proc.wait()
        # A reply written just before exiting is still in the pipe: let the reader take it first.
        if child.reader_task is not None:
            await asyncio.wait({child.reader_task}, timeout=DRAIN_AFTER_EXIT)
        if child.reply_transport is not None:
            child.reply_transport.close()
        child.returncode = returncode
        child.exited.set()
        child.resolve(Exited(returncode))
        if child in self._children:
            log.warning("python child %d %s", child.pid, describe_exit(returncode))
        self._discard(child)

    def _discard(self, child: Child, *, graceful: bool = False) -> asyncio.Task[None]:
        """Take ``child`` out of the pool (starting a replacement) and stop it; idempotent."""
        if child in self._children:
            self._children.discard(child)
            if not self._closed:
                self._start_child()
        if child.reap_task is None:
            child.reap_task = self._spawn_task(self._reap(child, graceful))
        return child.reap_task

    async def _reap(self, child: Child, graceful: bool) -> None:
        if child.retire_timer is not None:
            child.retire_timer.cancel()
        try:
            if graceful and not child.exited.is_set() and child.proc.stdin is not None:
                child.proc.stdin.close()  # EOF: the child exits after its current task
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(child.exited.wait(), self._kill_grace)
            if not child.exited.is_set():
                child.signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(child.exited.wait(), self._kill_grace)
                except TimeoutError:
                    child.signal(signal.SIGKILL)
                    try:
                        await asyncio.wait_for(child.exited.wait(), KILL_WAIT)
                    except TimeoutError:
                        log.error("python child %d did not die after SIGKILL", child.pid)
            child.signal(signal.SIGKILL)  # whatever the task left running in the child's group
            if child.proc.stdin is not None:
                child.proc.stdin.close()
            if self._reaper is not None:
                self._reaper.forget(child.pid)
        finally:
            # Runs as a task: it is done only after this returns, so close the output in a callback.
            asyncio.get_running_loop().call_soon(child.close_output_if_unused)

    def _offer(self, child: Child) -> None:
        """Make ``child`` idle. The idle are taken last-in first-out, so under a light load the
        same few children run everything and the others idle long enough to be let go."""
        loop = asyncio.get_running_loop()
        self._idle.put_nowait(child)
        child.idle_since = loop.time()
        if child.retire_timer is None and len(self._children) > self._warm:
            child.retire_timer = loop.call_later(self._retire_after, self._retire_if_idle, child)

    def _retire_if_idle(self, child: Child) -> None:
        """Let ``child`` go once it idled ``_retire_after`` while more than ``_warm`` remain (one
        timer per child, moved on while the child keeps being used)."""
        child.retire_timer = None
        if self._closed or child not in self._children or child.busy or len(self._children) <= self._warm:
            return  # a busy child looks again when it is offered next
        left = child.idle_since + self._retire_after - asyncio.get_running_loop().time()
        if left > 0:
            child.retire_timer = asyncio.get_running_loop().call_later(left, self._retire_if_idle, child)
            return
        self._children.discard(child)  # no replacement; its stale idle entry is skipped when taken
        child.kill_reason = "idle"
        child.reap_task = self._spawn_task(self._reap(child, graceful=True))

    def _grow(self) -> None:
        """Start one more child if the pool is below its size counting those starting; for a task
        that found no idle child (it takes whichever child is idle first)."""
        if not self._closed and len(self._children) + self._starting < self._size:
            self._start_child()

    def _start_child(self) -> None:
        """Start a child and add it to the pool (counted as starting from now on)."""
        self._starting += 1
        self._spawn_task(self._replace())

    async def _replace(self) -> None:
        """Start a child and add it to the pool, retrying with backoff until the pool closes."""
        try:
            await self._start_one()
        finally:
            self._starting -= 1

    async def _start_one(self) -> None:
        delay = 0.5
        while not self._closed:
            try:
                child = await self._spawn()
            except Exception as exc:
                log.error("python pool: cannot start a replacement child (retrying in %.1fs): %s", delay, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closed_event.wait(), delay)
                delay = min(delay * 2, 30.0)
                continue
            if self._closed:
                child.kill_reason = "the pool was closed"
                self._discard(child, graceful=True)
            else:
                self._children.add(child)
                self._offer(child)
            return
