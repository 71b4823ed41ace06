"""A shell task never outlives its worker: with a reaper the group is watched from the moment the
shell starts (it then runs without the death signal's extra program); without one the shell gets
the parent-death signal."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from schedd_exec import shell
from schedd_exec.environment import TaskEnvironment
from schedd_exec.reaper import Reaper
from tests.polling import wait_until
from tests.unit.test_reaper import alive

BOUND = 10.0

#: A stand-in worker: runs one shell task (with or without a reaper) that writes its pid and sleeps.
WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from schedd_exec.reaper import Reaper
    from schedd_exec.shell import run_shell

    async def main(pid_file: str, with_reaper: bool) -> None:
        reaper = Reaper() if with_reaper else None
        if reaper is not None:
            await reaper.start()
        command = f"echo $$ > {pid_file}; exec sleep 1000"
        await run_shell(command, env={}, timeout=None, kill_grace=1, reaper=reaper)

    asyncio.run(main(sys.argv[1], sys.argv[2] == "reaper"))
    """
)


@pytest.mark.parametrize("cover", ["reaper", "death signal"])
def test_a_shell_task_dies_with_its_worker_killed_by_sigkill(cover: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "shell.pid"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(pid_file), cover], env=os.environ.copy())
    try:
        wait_until("the shell to start", lambda: pid_file.exists() and pid_file.read_text().strip(), BOUND)
        shell_pid = int(pid_file.read_text())
        worker.send_signal(signal.SIGKILL)
        worker.wait(BOUND)
        wait_until("the shell to die with its worker", lambda: not alive(shell_pid), BOUND, interval=0.01)
    finally:
        worker.kill()
        worker.wait(BOUND)
        if pid_file.exists() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


class RecordingReaper(Reaper):
    """A reaper that records which groups it was told to watch (and starts no process)."""

    def __init__(self) -> None:
        super().__init__()
        self.watched: list[int] = []

    def watch(self, pgid: int) -> None:
        self.watched.append(pgid)


async def test_the_group_is_watched_before_the_loop_runs_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reaper = RecordingReaper()
    seen_by_the_loop: list[list[int]] = []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)
        # The first thing the loop runs after the start: the group must be watched by then.
        asyncio.get_running_loop().call_soon(lambda: seen_by_the_loop.append(list(reaper.watched)))
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen)
    outcome = await shell.run_shell("true", env={}, timeout=BOUND, kill_grace=1, reaper=reaper)
    assert outcome.succeeded, outcome.error
    assert len(reaper.watched) == 1 and seen_by_the_loop == [reaper.watched]


@pytest.mark.parametrize("with_reaper", [True, False])
async def test_the_death_signal_s_program_runs_only_without_a_reaper(
    with_reaper: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[str, ...]] = []
    real_popen = subprocess.Popen

    def popen(argv: tuple[str, ...], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(tuple(argv))
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    environment = TaskEnvironment.from_environ(os.environ)
    prefix = environment.command_prefix(death_signal=True)
    if not prefix:
        pytest.skip("no setpriv here: the death signal is unavailable")
    outcome = await shell.run_shell(
        "true", env={}, timeout=BOUND, kill_grace=1, reaper=RecordingReaper() if with_reaper else None
    )
    assert outcome.succeeded, outcome.error
    assert started == [("/bin/sh", "-c", "true") if with_reaper else (*prefix, "/bin/sh", "-c", "true")]
