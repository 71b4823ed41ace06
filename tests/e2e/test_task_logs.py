"""Task logs as a user reads them with ``schedctl tasks logs``, on real services: every try's log by
its try number (the latest by default, named on standard error), each line stamped with the UTC time
it was written, a failed try's traceback or exit code as the last lines of its own log, and ``-f``
following a task through its retries with an exit code that says how it ended. The same logs come
from the scheduler's local executor.

The Python tasks are in a code bundle registered with their spec (``--bundle``).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from schedd_devstack.services import Cluster
from tests.e2e.test_delivery import local_cluster
from tests.fixtures.services import RunningCluster, schedctl

pytestmark = pytest.mark.e2e

__all__ = ["local_cluster"]  # a fixture of this module too

#: Liveness bound (seconds) for runs and logs: generous on purpose.
LIVENESS = 60.0
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (.*)$")

TASK_CODE = '''
import os
import sys
import time


def flaky(params):
    """Prints, and fails with a traceback on its first try (after params["linger"] seconds)."""
    n = os.environ["SCHEDD_TRY_NUMBER"]
    print(f"starting try {n}", flush=True)
    print(f"warning on stderr {n}", file=sys.stderr, flush=True)
    if n == "1":
        time.sleep(params.get("linger", 0))
        raise ValueError(f"boom on try {n}")
    print("done", end="")  # a last line without a newline
    return n
'''


def flaky_dag(dag_id: str, *, linger: float = 0, retry_delay: str = "0.2s") -> dict[str, Any]:
    return {
        "dag_id": dag_id,
        "tasks": [
            {
                "task_id": "flaky",
                "retries": 1,
                "retry_delay": retry_delay,
                "params": {"linger": linger},
                "python": {"target": "task_logs_code:flaky"},
            }
        ],
    }


def register(api: str, directory: Path, spec: dict[str, Any]) -> None:
    (directory / "task_logs_code.py").write_text(TASK_CODE)
    path = directory / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    done = schedctl(api, "dags", "register", str(path), "--bundle", str(directory))
    assert done.returncode == 0, done.stdout + done.stderr


def trigger(api: str, dag_id: str, *, wait: bool) -> None:
    done = schedctl(api, "runs", "trigger", dag_id, "--run-id", "r1", *(["--wait"] if wait else []))
    assert done.returncode == 0, done.stdout + done.stderr


def logs_until(
    api: str, run: str, *options: str, done: Callable[[subprocess.CompletedProcess[str]], bool]
) -> subprocess.CompletedProcess[str]:
    """``tasks logs`` until ``done`` holds: a log is stored apart from the result, so it may land a
    moment after the run finished."""
    deadline = time.monotonic() + LIVENESS
    while True:
        shown = schedctl(api, "tasks", "logs", run, "flaky", *options)
        if shown.returncode == 0 and done(shown):
            return shown
        assert time.monotonic() < deadline, f"logs never complete: {shown}"
        time.sleep(0.2)


def stamped_lines(text: str, since: datetime) -> list[str]:
    """The lines of a log without their stamps, checking that each has one, in order, since ``since``."""
    lines, times = [], []
    for line in text.splitlines():
        found = STAMP.match(line)
        assert found, f"a line without its time: {line!r}"
        times.append(datetime.fromisoformat(found[1]).replace(tzinfo=UTC))
        lines.append(found[2])
    assert times == sorted(times) and since <= times[0] and times[-1] <= datetime.now(UTC), times
    return lines


def check_every_try_s_log(api: str, dag_id: str, tmp_path: Path) -> None:
    since = datetime.now(UTC) - timedelta(milliseconds=1)  # the stamps have milliseconds
    register(api, tmp_path, flaky_dag(dag_id))
    trigger(api, dag_id, wait=True)
    run = f"{dag_id}/r1"
    first = logs_until(api, run, "--try", "1", done=lambda s: "ValueError: boom on try 1\n" in s.stdout)
    lines = stamped_lines(first.stdout, since)
    assert lines[:2] == ["starting try 1", "warning on stderr 1"], lines
    # The failure ends the try's own log: the traceback, its last line the exception.
    assert lines[2] == "[schedd] try 1 failed: ValueError: boom on try 1", lines
    assert "Traceback (most recent call last):" in lines and "task_logs_code.py" in first.stdout
    assert lines[-1] == "ValueError: boom on try 1", lines
    assert "flaky: try 1 of 2" in first.stderr, first.stderr

    second = logs_until(api, run, "--try", "2", done=lambda s: s.stdout.endswith("done"))
    assert stamped_lines(second.stdout, since) == ["starting try 2", "warning on stderr 2", "done"]
    assert "flaky: try 2 of 2" in second.stderr and "[schedd]" not in second.stdout

    latest = schedctl(api, "tasks", "logs", run, "flaky")
    assert (latest.returncode, latest.stdout) == (0, second.stdout)
    assert "flaky: try 2 of 2" in latest.stderr, latest.stderr
    raw = schedctl(api, "tasks", "logs", run, "flaky", "--try", "1", "--no-timestamps")
    assert raw.stdout.startswith("starting try 1\nwarning on stderr 1\n[schedd] try 1 failed: ValueError")


def test_every_try_s_log_is_kept_stamped_with_its_failure_last(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    check_every_try_s_log(module_cluster.api_address, "logs_flaky", tmp_path)


def test_the_local_executor_keeps_the_same_logs(
    local_cluster: Callable[[str], Cluster], tmp_path: Path
) -> None:
    check_every_try_s_log(local_cluster("local").api_address, "logs_flaky_local", tmp_path)


def follow(api: str, run: str, *options: str) -> subprocess.CompletedProcess[str]:
    return schedctl(api, "tasks", "logs", run, "flaky", "-f", *options, timeout=LIVENESS)


def test_follow_exits_0_when_the_task_succeeds_and_1_when_it_fails(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = module_cluster.api_address
    for dag_id, command in [("logs_ok", "echo fine"), ("logs_failing", "echo going; exit 3")]:
        spec = {"dag_id": dag_id, "tasks": [{"task_id": "flaky", "shell": {"command": command}}]}
        (tmp_path / f"{dag_id}.json").write_text(json.dumps(spec))
        assert schedctl(api, "dags", "register", str(tmp_path / f"{dag_id}.json")).returncode == 0
        trigger(api, dag_id, wait=False)
    ok = follow(api, "logs_ok/r1")
    assert ok.returncode == 0 and ok.stdout.endswith(" fine\n"), ok
    failing = follow(api, "logs_failing/r1")
    assert failing.returncode == 1, failing
    *_, output, failure = failing.stdout.splitlines()
    assert output.endswith(" going") and failure.endswith(" [schedd] try 1 failed: exit code 3"), failing


def test_follow_goes_through_the_retries_to_the_final_state(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = module_cluster.api_address
    register(api, tmp_path, flaky_dag("logs_follow_retries", linger=2, retry_delay="1s"))
    trigger(api, "logs_follow_retries", wait=False)
    followed = follow(api, "logs_follow_retries/r1", "--no-timestamps")
    assert followed.returncode == 0, followed
    out = followed.stdout
    assert out.startswith("starting try 1\nwarning on stderr 1\n[schedd] try 1 failed: ValueError"), out
    assert out.endswith("ValueError: boom on try 1\nstarting try 2\nwarning on stderr 2\ndone"), out
    headers = [line for line in followed.stderr.splitlines() if ": try " in line and " of " in line]
    assert headers == ["flaky: try 1 of 2", "flaky: try 2 of 2"], followed.stderr
    # One try followed on its own: its exit code says how that try ended.
    assert follow(api, "logs_follow_retries/r1", "--try", "1").returncode == 1
    assert follow(api, "logs_follow_retries/r1", "--try", "2").returncode == 0


def test_a_queued_retry_does_not_hide_the_try_before_it(
    module_cluster: RunningCluster, tmp_path: Path
) -> None:
    api = module_cluster.api_address
    register(api, tmp_path, flaky_dag("logs_retry_pending", retry_delay="3600s"))
    trigger(api, "logs_retry_pending", wait=False)
    shown = logs_until(api, "logs_retry_pending/r1", done=lambda s: "boom on try 1\n" in s.stdout)
    assert "flaky: try 1 of 2" in shown.stderr, shown.stderr
    waiting = schedctl(api, "tasks", "logs", "logs_retry_pending/r1", "flaky", "--try", "2")
    assert waiting.returncode == 3 and "has not started try 2 yet" in waiting.stderr, waiting
