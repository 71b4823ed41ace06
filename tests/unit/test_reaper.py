"""The reaper process kills watched process groups (grandchildren included) at the deadline, at a
given time, and at once when its worker goes away; it leaves forgotten groups alone."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from schedd_exec.reaper import Reaper
from tests.polling import wait_until, wait_until_async

BOUND = 10.0


@pytest.fixture
async def reaper() -> AsyncIterator[Reaper]:
    r = Reaper()
    await r.start()
    yield r
    await r.close()


def group(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A shell in a session of its own whose background child writes its pid to a file."""
    script = f"sleep 1000 & echo $! > {tmp_path / 'grandchild'}; wait"
    tmp_path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    pid_file = tmp_path / "grandchild"
    wait_until("the group to start", lambda: pid_file.exists() and pid_file.read_text().strip(), BOUND)
    return proc


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


async def wait_dead(proc: subprocess.Popen[bytes], grandchild: int) -> None:
    await wait_until_async(
        "the group to be killed",
        lambda: proc.poll() is not None and not alive(grandchild),
        BOUND,
        interval=0.01,
    )


def grandchild_of(tmp_path: Path) -> int:
    return int((tmp_path / "grandchild").read_text())


async def test_a_watched_group_dies_at_the_deadline(reaper: Reaper, tmp_path: Path) -> None:
    proc = group(tmp_path)
    deadline = time.monotonic() + 0.3
    reaper.deadline(deadline)
    reaper.watch(proc.pid)
    await wait_dead(proc, grandchild_of(tmp_path))
    assert time.monotonic() >= deadline, "killed before its deadline"
    assert proc.returncode == -signal.SIGKILL


async def test_a_group_to_stop_dies_at_its_time_whatever_the_deadline(reaper: Reaper, tmp_path: Path) -> None:
    proc = group(tmp_path)
    reaper.deadline(time.monotonic() + 3600)
    reaper.watch(proc.pid)
    reaper.kill_at(proc.pid, time.monotonic() + 0.2)
    await wait_dead(proc, grandchild_of(tmp_path))


async def left_alone_at_the_deadline(reaper: Reaper, tmp_path: Path, let_go: Callable[[int], None]) -> None:
    """Two groups watched, one let go with ``let_go``: it lives on past the deadline that kills the other."""
    proc = group(tmp_path / "let_go")
    watched = group(tmp_path / "watched")
    try:
        reaper.deadline(time.monotonic() + 0.2)
        reaper.watch(proc.pid)
        reaper.watch(watched.pid)
        let_go(proc.pid)
        # The reaper kills every group watched at the deadline at once: once the one still watched is
        # dead, the deadline has come and gone for the other one too.
        await wait_dead(watched, grandchild_of(tmp_path / "watched"))
        assert proc.poll() is None
        assert alive(grandchild_of(tmp_path / "let_go"))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def test_a_forgotten_group_is_left_alone(reaper: Reaper, tmp_path: Path) -> None:
    await left_alone_at_the_deadline(reaper, tmp_path, reaper.forget)


async def test_a_released_group_is_left_alone_once_settled(reaper: Reaper, tmp_path: Path) -> None:
    def release_and_settle(pgid: int) -> None:
        reaper.release(pgid)  # a warm child between two attempts
        reaper.settle(0.0)  # released long enough ago: forgotten

    await left_alone_at_the_deadline(reaper, tmp_path, release_and_settle)


async def test_every_watched_group_dies_when_the_worker_goes_away(tmp_path: Path) -> None:
    reaper = Reaper()
    await reaper.start()
    proc = group(tmp_path)
    reaper.deadline(time.monotonic() + 3600)
    reaper.watch(proc.pid)
    await reaper.close()  # the pipe closes, as when the worker is killed
    await wait_dead(proc, grandchild_of(tmp_path))


async def test_a_group_watched_after_the_deadline_dies_at_once(reaper: Reaper, tmp_path: Path) -> None:
    reaper.deadline(time.monotonic() - 1)
    proc = group(tmp_path)
    reaper.watch(proc.pid)
    await wait_dead(proc, grandchild_of(tmp_path))


async def test_a_released_group_that_is_not_settled_still_dies_at_the_deadline(
    reaper: Reaper, tmp_path: Path
) -> None:
    proc = group(tmp_path)
    reaper.deadline(time.monotonic() + 0.3)
    reaper.watch(proc.pid)
    reaper.release(proc.pid)
    reaper.settle(3600.0)  # released only now: kept
    reaper.watch(proc.pid)  # the child's next attempt: still watched, nothing sent
    await wait_dead(proc, grandchild_of(tmp_path))
