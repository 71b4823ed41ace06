"""Task functions that ``test_python_pool.py`` and ``tests/benchmarks/pypool.py`` run in the pool's
child processes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

#: The identity variables the pool's tests give a task (its context is made of them).
IDENTITY = {
    "SCHEDD_DAG_ID": "d",
    "SCHEDD_RUN_ID": "r1",
    "SCHEDD_TASK_ID": "t",
    "SCHEDD_TRY_NUMBER": "2",
    "SCHEDD_IDEMPOTENCY_KEY": "d/r1/t/2",
}


def noop() -> None:
    return None


def answer() -> dict[str, Any]:
    return {"answer": 42, "items": [1, "two", None]}


def echo(params: dict[str, Any], context: dict[str, str]) -> dict[str, Any]:
    return {"params": params, "context": context}


def only_params(params: dict[str, Any]) -> Any:
    return params


def only_context(*, context: dict[str, str]) -> dict[str, str]:
    return context


def kwargs_only(**kwargs: Any) -> list[str]:
    return sorted(kwargs)


async def async_task(params: dict[str, Any]) -> str:
    await asyncio.sleep(0.01)
    return f"async {params['x']}"


def boom() -> None:
    raise ValueError("boom went the task")


def chained(n: int = 8) -> None:
    """A long traceback: each level wraps the one below."""
    try:
        if n == 0:
            raise KeyError("root")
        chained(n - 1)
    except Exception as exc:
        raise RuntimeError(f"level {n}") from exc


def exit_with(params: dict[str, Any]) -> None:
    sys.exit(params["code"])


def prints() -> str:
    print("hello from print")
    print("to stderr", file=sys.stderr)
    os.system("echo hi from a subprocess")
    os.write(2, b"raw fd 2\n")
    return "done"


def prints_a_lot(params: dict[str, Any]) -> None:
    sys.stdout.write("A" * params["n"] + "\n")
    sys.stdout.write("THE END\n")


def big_result(params: dict[str, Any]) -> str:
    return "x" * int(params["n"])


def unserialisable() -> set[int]:
    return {1, 2, 3}


def sleep(params: dict[str, Any]) -> dict[str, float]:
    start = time.time()
    time.sleep(params["seconds"])
    return {"start": start, "end": time.time(), "pid": os.getpid()}


def sleep_and_print(params: dict[str, Any]) -> None:
    print("about to sleep", flush=True)
    time.sleep(params["seconds"])


def ignore_sigterm_and_hang() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM", flush=True)
    time.sleep(60)


def hard_exit(params: dict[str, Any]) -> None:
    print("before exit", flush=True)
    os._exit(params["code"])


def segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)


def pid() -> int:
    return os.getpid()


def set_env(params: dict[str, Any]) -> dict[str, str | None]:
    given = os.environ.get("PYPOOL_GIVEN")
    os.environ["PYPOOL_SET_BY_TASK"] = "yes"
    os.environ["PATH"] = "/changed/by/a/task"  # a variable of the pool's own environment
    os.environ.pop("HOME", None)  # and one more, deleted
    os.environ["PYPOOL_GIVEN"] = "changed by the task"
    os.chdir("/")
    return {"given": given, "set": os.environ.get("PYPOOL_SET_BY_TASK")}


def read_env() -> dict[str, str | None]:
    return {
        "given": os.environ.get("PYPOOL_GIVEN"),
        "set": os.environ.get("PYPOOL_SET_BY_TASK"),
        "path": os.environ.get("PATH"),
        "home": os.environ.get("HOME"),
        "cwd": os.getcwd(),
    }


def replace_stdout() -> None:
    import io

    sys.stdout = io.StringIO()
    print("swallowed")


def print_line(params: dict[str, Any]) -> None:
    print(params["text"])


def read_stdin() -> str:
    return sys.stdin.read()


NOT_CALLABLE = 3


def spawn_grandchild_and_hang() -> None:
    import subprocess

    proc = subprocess.Popen(["sleep", "30"])
    print(f"grandchild {proc.pid}", flush=True)
    time.sleep(30)


def params_size(params: dict[str, Any]) -> int:
    return len(params["blob"])
