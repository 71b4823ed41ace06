"""The child side of the warm Python pool: ``python -m schedd_exec.python_child --reply-fd N``.

One child runs one task at a time, for as many tasks as the parent sends it
(see :mod:`schedd_exec.python_pool` for the parent and the guarantees it gives).

Protocol: frames of a 4-byte big-endian length followed by that many bytes of
UTF-8 JSON. Requests arrive on the child's stdin; replies leave on the pipe
whose write end the parent passed as ``--reply-fd``. At start-up the child
moves stdin to a private descriptor and puts ``/dev/null`` on fd 0, so nothing a
task does with fds 0, 1 or 2 can touch the protocol; both protocol descriptors
are close-on-exec, so a task's subprocesses do not inherit them. The first
frame the child sends is ``{"ready": pid}``.

Request: ``{"target": "pkg.mod:func", "env": {...}, "params": {...} | null}``.
Reply: ``{"ok": bool, "code": int, "error": str, "result": str, "recycle": bool}``
where ``result`` is the JSON text of the return value ("" for None) and
``recycle`` asks the parent to retire this child (its state looks damaged). A reply
for a target that cannot be resolved (its module fails to import, with the traceback
in ``error``; the name is missing or not callable) also has ``"no_retry": true``.
EOF on stdin makes the child exit with status 0.

The task's output: fds 1 and 2 of the child are, for its whole life, the
output file the parent created for it, so ``print``, ``sys.stderr``, C
extensions and subprocesses (``os.system``) all land there; the parent reads
it after each task. Per task the child:

* sets ``os.environ`` to its start-up environment (the pool's task environment, an allow-list
  of the worker's: ``schedd_exec.environment``; never the worker's secrets) plus the request's
  ``env`` and afterwards (once the reply is sent) restores it exactly (variables the task set or
  deleted too);
* restores the working directory and ``sys.stdout``/``sys.stderr`` objects;
* imports the module with :func:`importlib.import_module` (cached in
  ``sys.modules``: a module is imported once per child, so code changed on
  disk is seen only by new children);
* calls the function with its arguments, when the task has any (``SCHEDD_TASK_ARGUMENTS``, resolved
  from the upstream results by :mod:`schedd_core.arguments`), for an instance of a mapped task its
  elements of the expanded arguments (``SCHEDD_TASK_MAPPING`` and ``SCHEDD_MAP_INDEX``, by
  :mod:`schedd_core.mapped_arguments`), and, for the parameters the call does not give, the
  keyword arguments it declares among ``params`` (the request's params, ``{}`` when absent),
  ``context`` (the ``SCHEDD_*`` identity variables) and the task context's names (``ds``, ``ti``,
  ... when the request's ``env`` is a task attempt's); see :mod:`schedd_exec.task_call`. A
  parameter that nothing gives fails the task before it runs (``no_retry``); an ``async def``
  function (or a returned awaitable) is run with :func:`asyncio.run`;
* while the function runs, makes its task context the process's current one
  (``schedd_core.task_context.get_current_context``, also ``schedd_sdk.get_current_context``).

A transactional request (one with a ``transaction``: the task role's database URL and the
attempt's commit secret) makes the child non-dumpable as soon as it is read, so the tasks of
sibling children, which run as the same user, cannot read those from its memory; the child then
retires after that one task, so no later task of its own finds them either. (Between reading the
request and that ``prctl`` lie only microseconds of JSON parsing. The task itself can read both:
they are its own.)

On Linux the child asks the kernel to SIGKILL it when the worker process dies
(``PR_SET_PDEATHSIG``), so a hung task does not outlive a crashed worker;
processes the task started are not covered by that.

Not restored between tasks: other module-level state, ``sys.path``, signal
handlers, threads or subprocesses a task left running (they are killed when
the child is retired or killed, as the child leads its own process group).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import inspect
import json
import os
import signal
import struct
import sys
import traceback
from collections.abc import Callable, Coroutine
from typing import Any

from schedd_core import task_context
from schedd_core.arguments import ARGUMENTS_ENV, ArgumentError, resolve_arguments
from schedd_core.limits import MAX_RESULT_BYTES
from schedd_core.mapped_arguments import MAP_INDEX_ENV, MAPPING_ENV, resolve_mapped_arguments
from schedd_core.task_context import RunningTask
from schedd_exec import task_channel
from schedd_exec.task_call import SignatureError, TaskCallable

TRACEBACK_LINES = 20
#: A resolved target and what its signature accepts (cached per target by each child).
_Callable = TaskCallable
_HEADER = struct.Struct(">I")


def _upstream_results() -> dict[str, Any]:
    raw = os.environ.get("SCHEDD_UPSTREAM_RESULTS", "")
    value = json.loads(raw) if raw else {}
    return value if isinstance(value, dict) else {}


def _call_arguments(env: dict[str, str]) -> tuple[list[Any], dict[str, Any]]:
    """The task's call arguments and, for an instance of a mapped task, its expanded elements."""
    upstream = _upstream_results()
    args, named = resolve_arguments(env[ARGUMENTS_ENV], upstream) if ARGUMENTS_ENV in env else ([], {})
    if MAPPING_ENV in env:
        named.update(resolve_mapped_arguments(env[MAPPING_ENV], env.get(MAP_INDEX_ENV, ""), upstream))
    return args, named


class TaskError(Exception):
    """A failure to report with this message and no traceback."""


class TargetError(TaskError):
    """The target cannot be resolved (its module does not import, the name is missing or not
    callable): running the task again cannot help, so the reply says ``no_retry``."""


def resolve(target: str) -> Callable[..., Any]:
    """``pkg.mod:func`` (or ``pkg.mod:Class.method``) to the callable it names."""
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise TargetError(f"invalid target {target!r}: expected 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise TargetError(
            f"cannot import module {module_name!r} for target {target!r}: " + _trimmed(exc)
        ) from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(
                f"cannot find {attr_path!r} in module {module_name!r} (target {target!r})"
            ) from None
    if not callable(obj):
        raise TargetError(f"target {target!r} is not callable (it is a {type(obj).__name__})")
    return obj  # type: ignore[no-any-return]


def _trimmed(exc: BaseException) -> str:
    """``Type: message`` and the last lines of the traceback, without this module's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n").split("\n")
    if len(lines) > TRACEBACK_LINES:
        lines = ["... (traceback trimmed)", *lines[-TRACEBACK_LINES:]]
    head = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return head + "\n" + "\n".join(lines)


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _call(
    entry: _Callable,
    task: RunningTask | None,
    env: dict[str, str],
    params: dict[str, Any],
    transaction: dict[str, Any] | None,
) -> Any:
    """Call the target with its call arguments and the keyword arguments the worker adds, to the end
    (an awaitable result awaited, a transactional call committed with its success)."""
    args, named = _call_arguments(env) if ARGUMENTS_ENV in env or MAPPING_ENV in env else ([], {})
    supplied = {*entry.positional[: len(args)], *named}
    kwargs = entry.keywords(task, supplied, params, transactional=transaction is not None)
    func = functools.partial(entry.func, *args, **named) if args or named else entry.func
    if transaction is not None:
        import asyncio  # only now: importing it costs a child ~50 ms at start-up

        from schedd_exec.transactional import run_in_transaction

        return asyncio.run(run_in_transaction(func, kwargs, entry.wants_connection, transaction))
    result = func(**kwargs)
    if inspect.isawaitable(result):
        import asyncio  # only now: importing it costs a child ~50 ms at start-up

        coro: Coroutine[Any, Any, Any] = _await(result)
        result = asyncio.run(coro)
    return result


class Child:
    def __init__(self, req_fd: int, reply_fd: int, max_result_bytes: int) -> None:
        self._requests = os.fdopen(req_fd, "rb", buffering=256 * 1024)
        self._reply_fd = reply_fd
        self._max_result_bytes = max_result_bytes
        self._base_env = dict(os.environ)
        self._base_encoded = dict(_encoded(os.environ))
        self._base_cwd = os.getcwd()
        self._stdout = sys.stdout
        self._stderr = sys.stderr
        self._callables: dict[str, _Callable] = {}

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, separators=(",", ":")).encode()
        view = memoryview(_HEADER.pack(len(body)) + body)
        while view:
            view = view[os.write(self._reply_fd, view) :]

    def receive(self) -> dict[str, Any] | None:
        header = self._requests.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack(header)
        body = self._requests.read(size)
        if len(body) < size:
            return None
        message: dict[str, Any] = json.loads(body)
        return message

    def ask(self, question: dict[str, Any]) -> dict[str, Any]:
        """Ask the worker (a variable, a connection) while a task runs; its answer is the next
        message on the request pipe."""
        self.send(question)
        answer = self.receive()
        if answer is None:
            raise TaskError("the worker closed the channel while the task was asking it")
        return answer

    def serve(self) -> None:
        task_channel.install(self.ask)
        self.send({"ready": os.getpid()})
        while (request := self.receive()) is not None:
            transactional = request.get("transaction") is not None
            if transactional:
                _hide_from_other_tasks()
            reply = self.handle(request)
            # A transactional attempt's database URL and commit secret leave with this child.
            reply["recycle"] = not self._restore_streams() or reply.get("recycle", False) or transactional
            self.send(reply)
            # After the reply, off the task's way to its result: the next request is read only after.
            given = request.get("env")
            self._restore_environment(given if isinstance(given, dict) else {})

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        target = str(request.get("target", ""))
        env: dict[str, str] = request.get("env") or {}
        params: dict[str, Any] = request.get("params") or {}
        try:
            os.environ.update(env)
            entry = self._callables.get(target)
            if entry is None:
                entry = self._callables[target] = _Callable(resolve(target))
            task = RunningTask.from_environment(env, params)
            task_context.enter(task)
            result = _call(entry, task, env, params, request.get("transaction"))
        except TargetError as exc:
            # A failed import can leave half-imported modules behind: this child is retired.
            return {**_reply(False, 1, str(exc)), "no_retry": True, "recycle": True}
        except SignatureError as exc:
            return {**_reply(False, 1, str(exc)), "no_retry": True}
        except (TaskError, ArgumentError) as exc:
            return _reply(False, 1, str(exc))
        except SystemExit as exc:
            return _exit_reply(exc.code)
        except BaseException as exc:
            return _reply(False, 1, _trimmed(exc))
        finally:
            task_context.leave()
        return self._encode_result(result)

    def _encode_result(self, result: Any) -> dict[str, Any]:
        if result is None:
            return _reply(True, 0, "")
        try:
            text = json.dumps(result)
        except (TypeError, ValueError, RecursionError) as exc:
            return _reply(False, 1, f"the return value is not JSON-serialisable: {type(exc).__name__}: {exc}")
        size = len(text.encode())
        if size > self._max_result_bytes:
            return _reply(
                False,
                1,
                f"the return value is too large: {size} bytes of JSON, the limit is "
                f"{self._max_result_bytes} bytes",
            )
        return _reply(True, 0, "", text)

    def _restore_streams(self) -> bool:
        """Undo what a task may have done to the output streams and the working directory (flushed
        before the reply, so its output is complete when the worker reads it); False if this child
        should be retired."""
        healthy = True
        if sys.stdout is not self._stdout:
            sys.stdout = self._stdout
        if sys.stderr is not self._stderr:
            sys.stderr = self._stderr
        for stream in (self._stdout, self._stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                healthy = False
        try:
            if os.getcwd() != self._base_cwd:
                os.chdir(self._base_cwd)
        except OSError:
            healthy = False
        return healthy

    def _restore_environment(self, given: dict[str, str]) -> None:
        """Put ``os.environ`` back as it was at start-up: the variables of the request, then, only if
        the task changed others, every variable. The comparison is of ``os.environ``'s encoded
        mapping, which ``os.environ`` reads and writes through (a CPython detail; where it is
        missing, the decoded copies are compared)."""
        for key in given:
            value = self._base_env.get(key)
            if value is None:
                os.environ.pop(key, None)
            elif os.environ.get(key) != value:
                os.environ[key] = value
        if _encoded(os.environ) == self._base_encoded:
            return
        for key in [k for k in os.environ if k not in self._base_env]:
            del os.environ[key]
        for key, value in self._base_env.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def _encoded(environ: os._Environ[str]) -> dict[Any, Any]:
    """The mapping ``environ`` keeps its variables in (encoded), or a decoded copy without one."""
    data = getattr(environ, "_data", None)
    return data if isinstance(data, dict) else dict(environ)


def _reply(ok: bool, code: int, error: str, result: str = "") -> dict[str, Any]:
    return {"ok": ok, "code": code, "error": error, "result": result}


def _exit_reply(code: object) -> dict[str, Any]:
    if code is None or code == 0:
        return _reply(True, 0, "")
    if isinstance(code, int) and not isinstance(code, bool):
        return _reply(False, code, f"SystemExit({code})")
    return _reply(False, 1, f"SystemExit: {code}")


def _hide_from_other_tasks() -> None:
    """Make this child non-dumpable: the other tasks of its user (its sibling children's) cannot read
    its memory while it holds a transactional attempt's database URL and commit secret."""
    from schedd_exec.process_secrets import make_undumpable  # only now: ctypes costs start-up time

    make_undumpable()


def _die_with_parent(parent_pid: int) -> None:
    """On Linux, have the kernel SIGKILL this child when the worker dies, even by SIGKILL."""
    if not sys.platform.startswith("linux") or parent_pid <= 0:
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(137)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="schedd_exec.python_child")
    parser.add_argument("--reply-fd", type=int, required=True)
    parser.add_argument("--max-result-bytes", type=int, default=MAX_RESULT_BYTES)
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--import-path", default="", help="a code bundle's directory, instead of the cwd")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent_pid)

    # The protocol leaves fds 0-2 before any task code can run.
    req_fd = os.dup(0)  # os.dup makes a close-on-exec descriptor
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.set_inheritable(args.reply_fd, False)
    # Line-buffered stdout keeps print() and stderr roughly in order in the shared output file.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]

    cwd = os.getcwd()
    if args.import_path:
        # A code bundle's child: the bundle comes first, so every module it holds is imported from it.
        sys.path.insert(0, args.import_path)
    elif cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)

    Child(req_fd, args.reply_fd, args.max_result_bytes).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
