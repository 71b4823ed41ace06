"""The warm Python pool: real child processes running ``tests.unit.pypool_tasks``.

What happens is asserted here; how fast (throughput, time to end an overrunning task, to close) is
measured by ``make bench`` (``tests/benchmarks/pypool.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC
from typing import Any

import pytest

from schedd_exec.python_pool import PoolClosedError, PyOutcome, PythonPool
from tests.polling import wait_until_async
from tests.unit.pypool_tasks import IDENTITY

T = "tests.unit.pypool_tasks:"
#: Longest a child may take to start, to print or to die.
LIVENESS = 10.0


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[PythonPool]:
    async with PythonPool(2, kill_grace=0.5) as p:
        yield p


@pytest.fixture
async def solo() -> AsyncIterator[PythonPool]:
    """One child, so consecutive tasks run in the same process."""
    async with PythonPool(1, kill_grace=0.5) as p:
        yield p


async def run(pool: PythonPool, name: str, timeout: float | None = 10.0, **params: Any) -> PyOutcome:
    return await pool.run(T + name, env={}, timeout=timeout, params=params or None)


async def wait_full(pool: PythonPool) -> list[int]:
    """Wait for replacements to start; return the pids."""
    await wait_until_async("the pool to get back to its size", lambda: len(pool.pids) >= pool.size, LIVENESS)
    return pool.pids


def started(
    pool: PythonPool, name: str, timeout: float | None = None
) -> tuple[asyncio.Task[PyOutcome], asyncio.Event]:
    """Run ``name`` (a task that prints as it starts) in the background; the event is set at its first
    output, which proves it runs in a child."""
    printed = asyncio.Event()
    task = asyncio.create_task(
        pool.run(T + name, env={}, timeout=timeout, params={"seconds": 30}, on_output=lambda _: printed.set())
    )
    return task, printed


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie (an orphan waits for pid 1 to reap it, which can be slow)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


async def wait_gone(pid: int) -> None:
    await wait_until_async(f"process {pid} to end", lambda: gone(pid), LIVENESS)


async def test_success_with_return_value(pool: PythonPool) -> None:
    out = await run(pool, "answer")
    assert out.succeeded, out
    assert out.exit_code == 0
    assert out.error == ""
    assert json.loads(out.result_json) == {"answer": 42, "items": [1, "two", None]}
    assert out.started_at.tzinfo is UTC
    assert out.ended_at >= out.started_at
    none = await run(pool, "noop")
    assert none.succeeded and none.result_json == "" and none.output == ""


async def test_params_and_context_are_passed_as_declared(pool: PythonPool) -> None:
    env = {**IDENTITY, "OTHER": "x"}
    out = await pool.run(T + "echo", env=env, timeout=5, params={"a": [1, 2]})
    assert out.succeeded, out.error
    assert json.loads(out.result_json) == {"params": {"a": [1, 2]}, "context": IDENTITY}

    out = await pool.run(T + "only_params", env=env, timeout=5, params=None)
    assert json.loads(out.result_json) == {}
    out = await pool.run(T + "only_context", env=env, timeout=5, params={"a": 1})
    assert json.loads(out.result_json) == IDENTITY
    out = await pool.run(T + "kwargs_only", env=env, timeout=5)
    assert json.loads(out.result_json) == ["context", "params"]
    out = await pool.run(T + "answer", env=env, timeout=5, params={"ignored": True})
    assert out.succeeded


async def test_async_function(pool: PythonPool) -> None:
    out = await run(pool, "async_task", x=7)
    assert out.succeeded, out.error
    assert json.loads(out.result_json) == "async 7"


async def test_exception_gives_type_message_and_trimmed_traceback(pool: PythonPool) -> None:
    out = await run(pool, "boom")
    assert not out.succeeded
    assert out.exit_code == 1
    assert out.error.startswith("ValueError: boom went the task\n")
    assert "Traceback" in out.error and "pypool_tasks.py" in out.error
    assert "python_child.py" not in out.error

    deep = await run(pool, "chained")
    assert deep.error.startswith("RuntimeError: level 8\n")
    assert "traceback trimmed" in deep.error
    assert deep.error.endswith("RuntimeError: level 8")
    assert len(deep.error.splitlines()) <= 22


@pytest.mark.parametrize(
    ("code", "succeeded", "exit_code", "error"),
    [
        (0, True, 0, ""),
        (None, True, 0, ""),
        (3, False, 3, "SystemExit(3)"),
        ("bad thing", False, 1, "bad thing"),
    ],
)
async def test_system_exit(
    pool: PythonPool, code: object, succeeded: bool, exit_code: int, error: str
) -> None:
    out = await run(pool, "exit_with", code=code)
    assert (out.succeeded, out.exit_code) == (succeeded, exit_code)
    assert error in out.error
    assert (await run(pool, "noop")).succeeded  # the child survived


async def test_output_is_captured_from_python_and_fds(pool: PythonPool) -> None:
    out = await run(pool, "prints")
    assert out.succeeded, out.error
    for line in ("hello from print", "to stderr", "hi from a subprocess", "raw fd 2"):
        assert line in out.output
    assert json.loads(out.result_json) == "done"
    # The next task on any child starts with empty output.
    assert (await run(pool, "noop")).output == ""
    assert (await run(pool, "noop")).output == ""


async def test_output_is_truncated_with_a_marker() -> None:
    async with PythonPool(1, max_output_bytes=1000) as p:
        out = await run(p, "prints_a_lot", n=100_000)
    assert out.succeeded
    assert "bytes of output truncated" in out.output
    assert out.output.startswith("AAAA")
    assert out.output.endswith("THE END\n")
    assert len(out.output) < 1100


async def test_stdin_is_empty(pool: PythonPool) -> None:
    out = await run(pool, "read_stdin")
    assert out.succeeded and json.loads(out.result_json) == ""


async def test_bad_results_fail_clearly(pool: PythonPool) -> None:
    big = await run(pool, "big_result", n=100_000)
    assert not big.succeeded and big.exit_code == 1
    assert "too large" in big.error and "65536" in big.error
    ok = await run(pool, "big_result", n=1000)
    assert ok.succeeded
    bad = await run(pool, "unserialisable")
    assert not bad.succeeded
    assert "not JSON-serialisable" in bad.error and "set" in bad.error


async def test_unserialisable_params_fail_without_running(pool: PythonPool) -> None:
    out = await pool.run(T + "noop", env={}, timeout=1, params={"x": {1, 2}})
    assert not out.succeeded and "params are not JSON-serialisable" in out.error


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("tests.unit.no_such_module:f", "cannot import module 'tests.unit.no_such_module'"),
        ("tests.unit.pypool_tasks:nope", "cannot find 'nope' in module 'tests.unit.pypool_tasks'"),
        ("tests.unit.pypool_tasks", "invalid target"),
        ("tests.unit.pypool_tasks:NOT_CALLABLE", "is not callable"),
    ],
)
async def test_bad_targets(pool: PythonPool, target: str, expected: str) -> None:
    out = await pool.run(target, env={}, timeout=5)
    assert not out.succeeded and out.exit_code == 1
    assert expected in out.error
    if "no_such_module" in target:
        assert "ModuleNotFoundError" in out.error


async def test_timeout_kills_the_child_and_the_pool_recovers(pool: PythonPool) -> None:
    before = await wait_full(pool)
    out = await run(pool, "sleep_and_print", timeout=0.3, seconds=30)
    assert not out.succeeded and out.exit_code == -1
    assert out.error == "execution timeout of 0.3s exceeded"
    assert "about to sleep" in out.output
    after = await wait_full(pool)
    assert len(after) == 2 and set(after) != set(before)
    for dead in set(before) - set(after):
        assert gone(dead)
    outs = await asyncio.gather(*(run(pool, "answer") for _ in range(4)))
    assert all(o.succeeded for o in outs)


async def test_timeout_escalates_to_sigkill(pool: PythonPool) -> None:
    out = await run(pool, "ignore_sigterm_and_hang", timeout=0.2)
    assert out.error == "execution timeout of 0.2s exceeded"
    assert "ignoring SIGTERM" in out.output
    await wait_full(pool)
    assert (await run(pool, "noop")).succeeded


async def test_timeout_kills_what_the_task_started(pool: PythonPool) -> None:
    out = await run(pool, "spawn_grandchild_and_hang", timeout=0.5)
    assert out.error == "execution timeout of 0.5s exceeded"
    grandchild = int(out.output.split()[1])
    await wait_gone(grandchild)


async def test_large_params(pool: PythonPool) -> None:
    out = await run(pool, "params_size", blob="y" * 1_000_000)
    assert out.succeeded and json.loads(out.result_json) == 1_000_000


@pytest.mark.parametrize(
    ("task", "params", "exit_code", "error"),
    [
        ("hard_exit", {"code": 3}, 3, "exited with status 3"),
        ("segfault", {}, -signal.SIGSEGV, "killed by SIGSEGV"),
    ],
)
async def test_child_crash_fails_the_task_and_is_replaced(
    pool: PythonPool, task: str, params: dict[str, Any], exit_code: int, error: str
) -> None:
    out = await run(pool, task, **params)
    assert not out.succeeded
    assert out.exit_code == exit_code
    assert error in out.error
    if task == "hard_exit":
        assert "before exit" in out.output
    assert len(await wait_full(pool)) == 2
    outs = await asyncio.gather(*(run(pool, "noop") for _ in range(4)))
    assert all(o.succeeded for o in outs)


async def test_hard_exit_zero_counts_as_success(pool: PythonPool) -> None:
    out = await run(pool, "hard_exit", code=0)
    assert out.succeeded and out.exit_code == 0 and "before exit" in out.output


async def test_env_cwd_and_stdout_are_restored_between_tasks(solo: PythonPool) -> None:
    first = await solo.run(T + "set_env", env={"PYPOOL_GIVEN": "1"}, timeout=5)
    assert json.loads(first.result_json) == {"given": "1", "set": "yes"}
    second = await run(solo, "read_env")
    assert json.loads(second.result_json) == {
        "given": None,
        "set": None,
        "path": os.environ.get("PATH"),
        "home": os.environ.get("HOME"),
        "cwd": os.getcwd(),
    }

    assert (await run(solo, "replace_stdout")).succeeded
    out = await run(solo, "print_line", text="still captured")
    assert out.output == "still captured\n"


async def test_cancelling_run_kills_the_task(solo: PythonPool) -> None:
    (child,) = solo.pids
    task, printed = started(solo, "sleep_and_print")
    await asyncio.wait_for(printed.wait(), LIVENESS)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_gone(child)
    (replacement,) = await wait_full(solo)
    assert replacement != child
    assert (await run(solo, "noop")).succeeded


async def test_children_are_recycled() -> None:
    async with PythonPool(1, recycle_after=3) as p:
        pids = [json.loads((await run(p, "pid")).result_json) for _ in range(4)]
    assert pids[0] == pids[1] == pids[2] != pids[3]
    await wait_gone(pids[0])


async def test_four_children_run_in_parallel() -> None:
    async with PythonPool(4) as p:
        outs = await asyncio.gather(*(run(p, "sleep", seconds=0.5) for _ in range(4)))
    assert all(o.succeeded for o in outs), [o.error for o in outs]
    spans = [json.loads(o.result_json) for o in outs]
    assert len({s["pid"] for s in spans}) == 4
    # Every task started before any finished: they overlapped.
    assert max(s["start"] for s in spans) < min(s["end"] for s in spans)
    assert max(o.started_at for o in outs) < min(o.ended_at for o in outs)


async def test_close_stops_everything_and_later_runs_fail() -> None:
    p = PythonPool(2, kill_grace=0.3)
    await p.start()
    pids = p.pids
    busy, printed = started(p, "ignore_sigterm_and_hang")
    waiting = [asyncio.create_task(run(p, "noop")) for _ in range(3)]
    await asyncio.wait_for(printed.wait(), LIVENESS)  # it runs, and ignores SIGTERM from now on
    await p.close()
    for pid in pids:
        assert gone(pid)
    out = await busy
    assert not out.succeeded and "the pool was closed" in out.error
    for w in waiting:
        with contextlib.suppress(PoolClosedError):
            await w
    with pytest.raises(PoolClosedError):
        await run(p, "noop")
    assert p.pids == []


WORKER_THAT_DIES = """
import asyncio, os, signal
from schedd_exec.python_pool import PythonPool

async def main():
    pool = PythonPool(1)
    await pool.start()
    printed = asyncio.Event()
    asyncio.get_running_loop().create_task(pool.run("tests.unit.pypool_tasks:sleep_and_print", env={},
        timeout=None, params={"seconds": 30}, on_output=lambda _: printed.set()))
    await asyncio.wait_for(printed.wait(), 10)  # the child runs the task
    print(pool.pids[0], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


async def test_children_die_with_a_killed_worker() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WORKER_THAT_DIES, stdout=asyncio.subprocess.PIPE
    )
    stdout, _ = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == -signal.SIGKILL
    await wait_gone(int(stdout))


async def test_a_bad_interpreter_fails_start() -> None:
    p = PythonPool(1, python="/nonexistent/python")
    with pytest.raises(OSError):
        await p.start()
