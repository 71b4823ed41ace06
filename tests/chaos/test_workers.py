"""Workers under crashes, pauses and drains, with real worker, registry and scheduler processes.

Settings are fast (heartbeats every 0.5 s, an attempt is a zombie after 3 s without one, worker
leases of 2 s) so fail-overs take seconds. Each test checks safety from the database (the
``task_attempts`` history: which attempt was lost, which succeeded, that none overlapped or ran
twice) and, where the brief asks, from the tasks' own side effects (files they append to, named
after ``SCHEDD_ATTEMPT_ID``). Fail-over times and throughput are printed, never asserted; the
liveness bounds are generous so a loaded machine does not fail the suite.

Some tests guard against regressions found here: shell tasks crashing at start (a fork with
Python code between fork and exec while gRPC threads run), a frozen worker with free slots being
handed the retry, the first heartbeat coming late, departed workers' rows not ending 'gone', and
a stale load shown for idle workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_devstack.services import Cluster, ServiceProcess
from tests.fixtures.services import schedctl as run_schedctl
from tests.polling import wait_until

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

REPO_ROOT = Path(__file__).resolve().parents[2]
ZOMBIE_THRESHOLD = 3.0
WORKER_LEASE_TTL = 2
FAST = {
    "SCHEDD_HEARTBEAT_INTERVAL": "0.5",
    "SCHEDD_ZOMBIE_THRESHOLD": str(ZOMBIE_THRESHOLD),
    "SCHEDD_WORKER_LEASE_TTL": str(WORKER_LEASE_TTL),
}
#: Liveness bound for a fail-over or a run to finish: generous on purpose.
LIVENESS = 30.0

ATTEMPTS = """
SELECT a.attempt_id::text AS attempt_id, a.try_number, a.worker_id, a.state, a.claimed_at, a.started_at,
       a.ended_at, a.error
FROM task_attempts a
JOIN task_instances ti ON ti.id = a.ti_id
JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2 AND ti.task_id = $3
ORDER BY a.try_number, a.claimed_at
"""

TASK_INSTANCE = """
SELECT ti.state, ti.try_number, ti.max_tries, ti.attempt_id::text AS attempt_id, ti.worker_id, ti.error
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2 AND ti.task_id = $3
"""

MakeCluster = Callable[..., Cluster]


@pytest.fixture
def make_cluster(fresh_database_url: str, etcd_endpoints: str, tmp_path: Path) -> Iterator[MakeCluster]:
    """``make(**Cluster kwargs)``: a started cluster with the fast settings, on this test's database."""
    clusters: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        service_env = {**FAST, **kwargs.pop("service_env", {})}
        cluster = Cluster(
            fresh_database_url,
            etcd_endpoints,
            tmp_path / f"logs{len(clusters)}",
            service_env=service_env,
            cwd=REPO_ROOT,
            **kwargs,
        )
        clusters.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
        cluster.release_election()


# -- helpers ------------------------------------------------------------------------------------------


def schedctl(cluster: Cluster, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_schedctl(cluster.api_address, *args, timeout=timeout)


def register(cluster: Cluster, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = schedctl(cluster, "dags", "register", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def trigger(cluster: Cluster, dag_id: str, run_id: str) -> None:
    result = schedctl(cluster, "runs", "trigger", dag_id, "--run-id", run_id)
    assert result.returncode == 0, result.stdout + result.stderr


def one_task_dag(dag_id: str, command: str) -> dict[str, Any]:
    return {"dag_id": dag_id, "tasks": [{"task_id": "t", "shell": {"command": command}}]}


def run_state(cluster: Cluster, dag_id: str, run_id: str) -> str | None:
    state = cluster.fetchval("SELECT state FROM dag_runs WHERE dag_id = $1 AND run_id = $2", dag_id, run_id)
    return None if state is None else str(state)


def wait_run_finished(cluster: Cluster, dag_id: str, run_id: str, timeout: float = LIVENESS) -> str:
    wait_until(
        f"run {dag_id}/{run_id} to finish",
        lambda: run_state(cluster, dag_id, run_id) in ("success", "failed"),
        timeout,
        interval=0.1,
    )
    return str(run_state(cluster, dag_id, run_id))


def task_instance(cluster: Cluster, dag_id: str, run_id: str, task_id: str = "t") -> dict[str, Any]:
    rows = cluster.fetch(TASK_INSTANCE, dag_id, run_id, task_id)
    assert len(rows) == 1, rows
    return rows[0]


def attempts(cluster: Cluster, dag_id: str, run_id: str, task_id: str = "t") -> list[dict[str, Any]]:
    return cluster.fetch(ATTEMPTS, dag_id, run_id, task_id)


def wait_running(cluster: Cluster, dag_id: str, run_id: str, task_id: str = "t") -> dict[str, Any]:
    """Wait until the task instance runs (claimed by a worker); its row."""

    def running() -> bool:
        rows = cluster.fetch(TASK_INSTANCE, dag_id, run_id, task_id)
        if rows and rows[0]["state"] in ("success", "failed", "upstream_failed", "skipped"):
            raise AssertionError(f"{dag_id}/{run_id}/{task_id} finished before we saw it run: {rows[0]}")
        return bool(rows) and rows[0]["state"] == "running" and bool(rows[0]["worker_id"])

    wait_until(f"{dag_id}/{run_id}/{task_id} to run", running, LIVENESS)
    return task_instance(cluster, dag_id, run_id, task_id)


def failure_context(cluster: Cluster, *procs: ServiceProcess) -> str:
    """Log tails for an assertion message: the given processes plus the leading scheduler."""
    leader = cluster.leader()
    shown = [*procs, *([leader] if leader is not None else [])]
    return "\n\n".join(p.describe_failure("log") for p in shown)


def stamped_command(
    directory: Path, *, ticks: int, tick_seconds: float, retry_ticks: int | None = None
) -> str:
    """A shell command that appends ``start``, ``tick``... and ``end`` lines with wall-clock times
    (seconds since the epoch) to ``directory/$SCHEDD_ATTEMPT_ID``; ``ticks`` ticks on try 1,
    ``retry_ticks`` (default: as many) on later tries."""
    retry_ticks = ticks if retry_ticks is None else retry_ticks
    return (
        f'f="{directory}/${{SCHEDD_ATTEMPT_ID:?no attempt id}}"; '
        'echo "start $(date +%s.%N) try=$SCHEDD_TRY_NUMBER" >> "$f"; '
        f'n={ticks}; [ "$SCHEDD_TRY_NUMBER" = 1 ] || n={retry_ticks}; '
        f"i=0; while [ $i -lt $n ]; do sleep {tick_seconds}; "
        'echo "tick $(date +%s.%N)" >> "$f"; i=$((i+1)); done; '
        'echo "end $(date +%s.%N)" >> "$f"'
    )


def stamps(path: Path) -> list[tuple[str, float]]:
    """The ``(kind, epoch seconds)`` lines a stamped command wrote."""
    lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [(parts[0], float(parts[1])) for parts in lines]


def epoch(value: datetime) -> float:
    return value.timestamp()


# -- 1. kill -9 a worker mid-task -----------------------------------------------------------------------


def test_kill_9_worker_mid_task_fails_over_without_overlap(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = make_cluster(workers=2)
    marks = tmp_path / "marks"
    marks.mkdir()
    register(cluster, tmp_path, one_task_dag("killed", stamped_command(marks, ticks=8, tick_seconds=0.25)))
    trigger(cluster, "killed", "r1")

    ti = wait_running(cluster, "killed", "r1")
    victim = str(ti["worker_id"])
    first_attempt = str(ti["attempt_id"])
    first_file = marks / first_attempt
    wait_until("the first attempt's process to start", first_file.exists, LIVENESS)

    killed_wall = time.time()
    cluster.kill_worker(victim)
    state = wait_run_finished(cluster, "killed", "r1")
    assert state == "success", failure_context(cluster)

    rows = attempts(cluster, "killed", "r1")
    assert [(r["try_number"], r["state"]) for r in rows] == [(1, "lost"), (2, "success")], rows
    lost, retry = rows
    assert lost["attempt_id"] == first_attempt and lost["worker_id"] == victim
    assert retry["worker_id"] != victim, "the retry ran on the killed worker"
    assert sum(r["state"] == "success" for r in rows) == 1
    # The fail-over set the lost attempt's end; the retry started after it.
    assert lost["ended_at"] is not None and retry["started_at"] is not None, rows
    assert lost["ended_at"] <= retry["started_at"], f"attempts overlap: {rows}"
    ti = task_instance(cluster, "killed", "r1")
    assert (ti["state"], ti["try_number"], ti["attempt_id"]) == ("success", 2, retry["attempt_id"]), ti

    # The tasks' own view: the killed attempt's process died with its worker (PDEATHSIG): it never
    # finished, and wrote nothing once the retry had begun.
    retry_file = marks / str(retry["attempt_id"])
    assert sorted(p.name for p in marks.iterdir()) == sorted([first_attempt, str(retry["attempt_id"])])
    first, second = stamps(first_file), stamps(retry_file)
    assert [k for k, _ in second] == ["start"] + ["tick"] * 8 + ["end"], second
    retry_began = second[0][1]
    assert "end" not in [k for k, _ in first], f"the killed attempt ran to its end: {first}"
    late = [(k, t) for k, t in first if t >= retry_began]
    assert not late, f"the killed attempt kept running after the retry began at {retry_began}: {late}"
    assert first[0][0] == "start" and first[-1][1] <= killed_wall + 1.0, first
    print(
        f"\nkill -9 of {victim} mid-task: retry (try 2 on {retry['worker_id']}) started "
        f"{retry_began - killed_wall:.2f}s after the kill (zombie threshold {ZOMBIE_THRESHOLD:g}s, "
        f"worker lease TTL {WORKER_LEASE_TTL}s)"
    )


# -- 2. SIGSTOP a worker past the zombie threshold --------------------------------------------------


def test_paused_worker_late_result_is_rejected(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = make_cluster(workers=0)
    # Capacity 1: the paused worker has no free slot, so the retry cannot be handed to it (with a
    # free slot it is: test_paused_worker_with_free_slots_is_not_given_the_retry).
    paused = cluster.add_worker("paused", capacity=1)
    marks = tmp_path / "marks"
    marks.mkdir()
    # The retry is short: a long one on a worker that connected moments before is failed over as a
    # zombie (test_an_attempt_started_right_after_its_worker_connected_is_not_a_zombie).
    command = stamped_command(marks, ticks=8, tick_seconds=0.5, retry_ticks=2)
    register(cluster, tmp_path, one_task_dag("stopped", command))
    trigger(cluster, "stopped", "r1")
    ti = wait_running(cluster, "stopped", "r1")
    assert ti["worker_id"] == "paused"
    stale_attempt = str(ti["attempt_id"])
    wait_until("the first attempt's process to start", (marks / stale_attempt).exists, LIVENESS)
    cluster.add_worker("rescuer")

    paused_at = time.monotonic()
    paused.pause()
    try:
        state = wait_run_finished(cluster, "stopped", "r1")
        failed_over = time.monotonic() - paused_at
        assert state == "success", failure_context(cluster, paused)
        ti = task_instance(cluster, "stopped", "r1")
        retry_attempt = str(ti["attempt_id"])
        assert retry_attempt != stale_attempt and ti["worker_id"] == "rescuer", ti
        # Stay paused past the zombie threshold and the lease TTL even if the retry was quick.
        time.sleep(max(0.0, ZOMBIE_THRESHOLD + WORKER_LEASE_TTL - (time.monotonic() - paused_at)))
    finally:
        paused.resume()
    print(f"\nSIGSTOP of a worker: its task ran again and succeeded elsewhere {failed_over:.2f}s later")

    # Once thawed, the worker reports its stale attempt (finished or cancelled): the registry refuses.
    marker = re.compile(
        rf"(registry rejected the result of attempt {stale_attempt}|cancelled attempt {stale_attempt}"
        rf"|abandoning attempt {stale_attempt})"
    )
    wait_until(
        "the paused worker to hear of it", lambda: bool(marker.search(paused.log_tail(20000))), LIVENESS
    )
    rejected = f"registry rejected the result of attempt {stale_attempt}"
    wait_until("the stale result to be rejected", lambda: rejected in paused.log_tail(20000), LIVENESS)
    assert paused.alive, paused.describe_failure("the thawed worker died")

    ti = task_instance(cluster, "stopped", "r1")
    assert (ti["state"], ti["attempt_id"], ti["worker_id"]) == ("success", retry_attempt, "rescuer"), ti
    # The tasks' own view: the frozen worker's reaper killed the stale attempt's process before the
    # retry began, although the worker itself could do nothing.
    retry_began = stamps(marks / retry_attempt)[0][1]
    late = [(k, t) for k, t in stamps(marks / stale_attempt) if t >= retry_began]
    assert not late, f"the frozen worker's attempt ran on after the retry began at {retry_began}: {late}"
    rows = attempts(cluster, "stopped", "r1")
    assert [(r["attempt_id"], r["state"]) for r in rows] == [
        (stale_attempt, "lost"),
        (retry_attempt, "success"),
    ], rows
    assert run_state(cluster, "stopped", "r1") == "success"


def test_paused_worker_with_free_slots_is_not_given_the_retry(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster(workers=0)
    paused = cluster.add_worker("paused", capacity=4)
    command = 'if [ "$SCHEDD_TRY_NUMBER" = 1 ]; then sleep 6; else sleep 0.5; fi'
    register(cluster, tmp_path, one_task_dag("frozen", command))
    trigger(cluster, "frozen", "r1")
    ti = wait_running(cluster, "frozen", "r1")
    assert ti["worker_id"] == "paused"
    cluster.add_worker("rescuer")
    paused.pause()
    try:
        state = wait_run_finished(cluster, "frozen", "r1")
    finally:
        paused.resume()
    rows = attempts(cluster, "frozen", "r1")
    print("\nattempts while the first worker was paused:")
    for r in rows:
        print(f"  try {r['try_number']} on {r['worker_id']}: {r['state']} ({r['error'] or ''})")
    assert state == "success", failure_context(cluster)
    assert [(r["state"], r["worker_id"]) for r in rows] == [("lost", "paused"), ("success", "rescuer")]


def test_an_attempt_started_right_after_its_worker_connected_is_not_a_zombie(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster(workers=0)
    register(cluster, tmp_path, one_task_dag("early", "sleep 4"))
    trigger(cluster, "early", "r1")
    queued = "SELECT count(*) FROM task_instances WHERE task_id = 't' AND state = 'queued'"
    wait_until("the task to be queued", lambda: cluster.fetchval(queued) == 1, LIVENESS)
    fresh = cluster.add_worker("fresh")  # claims the queued task as soon as it connects
    assert wait_run_finished(cluster, "early", "r1") == "success"
    rows = attempts(cluster, "early", "r1")
    for r in rows:
        print(f"\n  try {r['try_number']} on {r['worker_id']}: {r['state']} {r['error'] or ''}", end="")
    assert [(r["try_number"], r["state"]) for r in rows] == [(1, "success")], fresh.log_tail()


@pytest.mark.parametrize("runner", ["worker-capacity-1", "sequential-executor"])
def test_shell_tasks_do_not_crash_at_start(make_cluster: MakeCluster, tmp_path: Path, runner: str) -> None:
    if runner == "worker-capacity-1":
        cluster = make_cluster(workers=0)
        cluster.add_worker("small", capacity=1)
    else:
        cluster = make_cluster(registries=0, workers=0, scheduler_env={"SCHEDD_EXECUTOR": "sequential"})
    n = 30
    tasks = [{"task_id": f"s{i:02d}", "shell": {"command": "echo hello"}} for i in range(n)]
    register(cluster, tmp_path, {"dag_id": "shells", "tasks": tasks})
    trigger(cluster, "shells", "r1")
    wait_run_finished(cluster, "shells", "r1", timeout=LIVENESS * 2)
    rows = cluster.fetch(
        "SELECT ti.task_id, ti.state, ti.exit_code, ti.error FROM task_instances ti "
        "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.dag_id = 'shells' ORDER BY ti.task_id"
    )
    crashed = [r for r in rows if r["state"] != "success"]
    print(
        f"\n{runner}: {len(crashed)} of {n} 'echo hello' tasks failed: "
        f"{sorted({r['error'] for r in crashed})}"
    )
    assert len(rows) == n and not crashed, crashed[:3]


# -- 3. two registries, four workers, 1,000 tasks --------------------------------------------------


def test_two_registries_four_workers_drain_1000_tasks(make_cluster: MakeCluster, tmp_path: Path) -> None:
    n = 1000
    cluster = make_cluster(
        registries=2,
        workers=4,
        worker_capacity=8,
        # Two warm interpreters per worker are plenty for no-ops on a small machine.
        worker_env={"SCHEDD_PYTHON_WORKERS": "2"},
    )
    by_registry: dict[str, set[str]] = {}
    for worker_id in cluster.workers:
        by_registry.setdefault(cluster.worker_registries[worker_id], set()).add(worker_id)
    assert len(by_registry) == 2 and all(len(w) == 2 for w in by_registry.values()), by_registry

    spec = {
        "dag_id": "many",
        "tasks": [
            {"task_id": f"n{i:04d}", "python": {"target": "tests.chaos.noop_tasks:noop"}} for i in range(n)
        ],
    }
    register(cluster, tmp_path, spec)
    began = time.monotonic()
    trigger(cluster, "many", "r1")
    state = wait_run_finished(cluster, "many", "r1", timeout=180)
    elapsed = time.monotonic() - began
    assert state == "success", failure_context(cluster, *cluster.workers.values())

    states = cluster.fetch(
        "SELECT ti.state, count(*) AS n FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'many' GROUP BY ti.state"
    )
    assert {r["state"]: r["n"] for r in states} == {"success": n}, states
    rows = cluster.fetch(
        "SELECT a.ti_id, a.try_number, a.state, a.worker_id, a.claimed_at, a.ended_at FROM task_attempts a "
        "JOIN task_instances ti ON ti.id = a.ti_id JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'many'"
    )
    assert len(rows) == n, f"{len(rows)} attempts for {n} tasks"
    assert {r["state"] for r in rows} == {"success"}
    assert len({r["ti_id"] for r in rows}) == n, "a task instance was handed out twice"
    assert {r["try_number"] for r in rows} == {1}
    per_worker: dict[str, int] = {}
    for r in rows:
        per_worker[r["worker_id"]] = per_worker.get(r["worker_id"], 0) + 1
    per_registry = {
        address: sum(per_worker.get(w, 0) for w in workers) for address, workers in by_registry.items()
    }
    assert all(count > 0 for count in per_registry.values()), f"a registry handed out nothing: {per_worker}"
    assert cluster.dead() == [], [p.describe_failure("died") for p in cluster.dead()]

    first_claim = min(r["claimed_at"] for r in rows)
    last_end = max(r["ended_at"] for r in rows)
    dispatch_seconds = (last_end - first_claim).total_seconds()
    print(
        f"\n{n} no-op Python tasks, 2 registries x 2 workers (capacity 8): "
        f"{n / elapsed:.0f} tasks/s from trigger to run success ({elapsed:.2f}s), "
        f"{n / dispatch_seconds:.0f} tasks/s from first claim to last result ({dispatch_seconds:.2f}s); "
        f"per worker {dict(sorted(per_worker.items()))}"
    )


# -- 4. a worker dies after the task's work, before its report --------------------------------------


def test_worker_dies_after_the_work_before_the_report(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = make_cluster(workers=2)
    effects = tmp_path / "effects.txt"
    command = (
        f'echo "$SCHEDD_IDEMPOTENCY_KEY $SCHEDD_ATTEMPT_ID $SCHEDD_TRY_NUMBER $PPID" >> "{effects}"; '
        # The work is done; now the worker (our parent) dies before it can report it.
        'if [ "$SCHEDD_TRY_NUMBER" = 1 ]; then kill -9 $PPID; sleep 10; fi'
    )
    register(cluster, tmp_path, one_task_dag("unreported", command))
    worker_pids = {wid: proc.pid for wid, proc in cluster.workers.items()}
    trigger(cluster, "unreported", "r1")

    state = wait_run_finished(cluster, "unreported", "r1")
    assert state == "success", failure_context(cluster)
    rows = attempts(cluster, "unreported", "r1")
    assert [(r["try_number"], r["state"]) for r in rows] == [(1, "lost"), (2, "success")], rows
    lost, retry = rows
    lines = [line.split() for line in effects.read_text().splitlines()]
    assert len(lines) == 2, lines
    (key1, attempt1, try1, ppid1), (key2, attempt2, try2, _ppid2) = lines
    assert key1 == key2 == "unreported/r1/t", "the idempotency key must be the same for every attempt"
    assert (attempt1, try1) == (lost["attempt_id"], "1") and (attempt2, try2) == (retry["attempt_id"], "2")
    assert attempt1 != attempt2
    # `$PPID` of `/bin/sh -c` under the shell runner is the worker process itself.
    assert int(ppid1) == worker_pids[lost["worker_id"]], (ppid1, worker_pids)
    dead = cluster.workers[lost["worker_id"]]
    assert not dead.alive and dead.returncode == -signal.SIGKILL
    assert retry["worker_id"] != lost["worker_id"]
    ti = task_instance(cluster, "unreported", "r1")
    assert (ti["state"], ti["try_number"]) == ("success", 2), ti


# -- 5. drain by SIGTERM ----------------------------------------------------------------------------


def observe_worker_states(
    cluster: Cluster, worker_id: str, proc: ServiceProcess, timeout: float
) -> list[str]:
    """The distinct states of the worker's row, in order, until the process has exited (bounded by
    ``timeout``) and then until the row says 'gone' (bounded by 3 s more: the row is not asserted,
    as it often stays behind; see test_a_worker_whose_stream_ended_is_listed_as_gone)."""
    seen: list[str] = []

    def sample() -> None:
        state = cluster.fetchval("SELECT state FROM workers WHERE worker_id = $1", worker_id)
        if state is not None and (not seen or seen[-1] != state):
            seen.append(str(state))

    def exited() -> bool:
        sample()
        return not proc.alive

    def gone() -> bool:
        sample()
        return seen[-1:] == ["gone"]

    try:
        wait_until(f"worker {worker_id} to exit", exited, timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; states seen: {seen}\n{failure_context(cluster, proc)}") from None
    with contextlib.suppress(AssertionError):
        wait_until(f"worker {worker_id}'s row to say gone", gone, 3)
    return seen


def test_sigterm_lets_the_running_task_finish(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = make_cluster(workers=0)
    drainee = cluster.add_worker("drainee")
    register(cluster, tmp_path, one_task_dag("drained", "echo started; sleep 2; echo finished"))
    trigger(cluster, "drained", "r1")
    ti = wait_running(cluster, "drained", "r1")
    assert ti["worker_id"] == "drainee"
    cluster.add_worker("spare")

    drainee.send_signal(signal.SIGTERM)
    states = observe_worker_states(cluster, "drainee", drainee, LIVENESS)
    status = drainee.wait_or_kill(5)
    assert status == 0, drainee.describe_failure(f"the drained worker exited with {status}")
    assert set(states) <= {"active", "draining", "gone"}, states
    # Expected: ... -> gone. The registry often loses the last update (a bug, shown by
    # test_a_worker_whose_stream_ended_is_listed_as_gone), so the row is printed, not asserted.
    print(f"\nworker states seen during a SIGTERM drain: {' -> '.join(states)}")

    assert wait_run_finished(cluster, "drained", "r1") == "success", failure_context(cluster, drainee)
    rows = attempts(cluster, "drained", "r1")
    assert [(r["try_number"], r["state"], r["worker_id"]) for r in rows] == [(1, "success", "drainee")], rows
    lost = cluster.fetchval("SELECT count(*) FROM task_attempts WHERE state = 'lost'")
    assert lost == 0


def test_a_worker_that_reconnected_exits_without_errors(make_cluster: MakeCluster) -> None:
    """A worker whose stream broke once (its registry restarted) and that is then stopped exits
    cleanly. The broken session's messages were written by gRPC from an async generator that
    outlived its stream, and at exit asyncio logged "Task exception was never retrieved" (closing
    the generator mid-iteration) and "Task was destroyed but it is pending!"."""
    cluster = make_cluster(workers=0)
    worker = cluster.add_worker("reconnecting")
    registry = cluster.registry
    assert registry is not None

    def connections() -> int:
        return worker.log_tail().count("connected to registry as")

    wait_until("the worker to connect", lambda: connections() >= 1, LIVENESS)
    registry.terminate()
    registry.start()
    wait_until("the worker to connect again", lambda: connections() >= 2, LIVENESS)

    worker.send_signal(signal.SIGTERM)
    status = worker.wait_or_kill(10)
    assert status == 0, worker.describe_failure(f"the worker exited with {status}")
    assert "ERROR asyncio" not in worker.log_tail(), worker.describe_failure(
        "the worker's exit logged errors"
    )


def test_sigterm_with_short_grace_hands_the_task_back(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = make_cluster(workers=0)
    drainee = cluster.add_worker("hasty", env={"SCHEDD_DRAIN_GRACE": "0.5"})
    marks = tmp_path / "marks"
    marks.mkdir()
    # A short retry, as in test_paused_worker_late_result_is_rejected.
    command = stamped_command(marks, ticks=10, tick_seconds=0.5, retry_ticks=2)
    register(cluster, tmp_path, one_task_dag("handback", command))
    trigger(cluster, "handback", "r1")
    ti = wait_running(cluster, "handback", "r1")
    assert ti["worker_id"] == "hasty"
    first_attempt = str(ti["attempt_id"])
    wait_until("the first attempt's process to start", (marks / first_attempt).exists, LIVENESS)
    cluster.add_worker("spare")

    signalled = time.monotonic()
    drainee.send_signal(signal.SIGTERM)
    status = drainee.wait_or_kill(LIVENESS)
    exited = time.monotonic() - signalled
    assert status == 0, drainee.describe_failure(f"the drained worker exited with {status}")
    state = wait_run_finished(cluster, "handback", "r1", timeout=LIVENESS + 10)
    assert state == "success", failure_context(cluster, drainee)

    rows = attempts(cluster, "handback", "r1")
    assert [(r["try_number"], r["state"], r["worker_id"]) for r in rows] == [
        (1, "lost", "hasty"),
        (2, "success", "spare"),
    ], rows
    first = stamps(marks / first_attempt)
    assert "end" not in [k for k, _ in first], f"the handed-back attempt ran to its end: {first}"
    retry_began = stamps(marks / str(rows[1]["attempt_id"]))[0][1]
    assert all(t < retry_began for _, t in first), "the handed-back attempt overlapped its retry"
    print(f"\nSIGTERM with a 0.5s drain grace: the worker exited {exited:.2f}s later, handing its task back")


# -- 6. schedctl workers drain / list ---------------------------------------------------------------


def test_schedctl_drains_an_idle_worker_and_lists_workers(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = make_cluster(workers=2, worker_capacity=3)
    # A second registry with a worker of its own: the drain request must reach the right registry.
    far_registry = cluster.add_registry()
    far = cluster.add_worker("far", registry=far_registry, env={"SCHEDD_WORKER_QUEUES": "default,bulk"})
    registry_of = {
        "worker-1": cluster.registry_ids[cluster.registry_address],
        "worker-2": cluster.registry_ids[cluster.registry_address],
        "far": cluster.registry_ids[far_registry],
    }
    assert cluster.registry_of_worker("far") == registry_of["far"] != registry_of["worker-1"]

    listed = schedctl(cluster, "workers", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    workers = {w["worker_id"]: w for w in json.loads(listed.stdout)}
    assert set(workers) == set(registry_of), workers
    for worker_id, w in workers.items():
        queues = ["default", "bulk"] if worker_id == "far" else ["default"]
        capacity = cluster.worker_capacity
        assert (w["queues"], w["capacity"], w["state"]) == (queues, capacity, "active"), w
        assert int(w.get("running", 0)) == 0 and w["registry"] == registry_of[worker_id], w
    table = schedctl(cluster, "workers", "list")
    assert table.returncode == 0, table.stderr
    cells = {
        row[0]: row
        for row in ([c.strip() for c in ln.split("│")[1:-1]] for ln in table.stdout.splitlines())
        if row
    }
    for worker_id in workers:
        shown = "default,bulk" if worker_id == "far" else "default"
        assert cells[worker_id][1:5] == ["active", shown, "0/3", registry_of[worker_id]], table.stdout

    result = schedctl(cluster, "workers", "drain", "far")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "drain requested for worker far" in result.stdout
    asked = time.monotonic()
    status = far.wait_or_kill(LIVENESS)
    assert status == 0, far.describe_failure(f"the drained worker exited with {status}")
    print(
        f"\nschedctl workers drain: the idle worker exited {time.monotonic() - asked:.2f}s after the request"
    )
    assert "draining: 0 attempts running" in far.log_tail()
    # Its row should now say 'gone' (see test_a_worker_whose_stream_ended_is_listed_as_gone); the
    # others are untouched.
    listed = schedctl(cluster, "workers", "list", "-o", "json")
    states = {w["worker_id"]: w["state"] for w in json.loads(listed.stdout)}
    assert states.get("worker-1") == states.get("worker-2") == "active", states
    assert cluster.workers["worker-1"].alive and cluster.workers["worker-2"].alive
    unknown = schedctl(cluster, "workers", "drain", "no-such-worker")
    assert unknown.returncode == 3 and "no-such-worker" in unknown.stderr, unknown.stderr  # not found


async def connect_and_leave(registry: str, worker_id: str, *, draining: bool) -> None:
    """Speak the worker protocol: hello, wait for the welcome, (say Draining,) then cancel the stream,
    as a worker does when it exits."""
    outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
    hello = worker_pb2.WorkerHello(
        worker_id=worker_id, hostname="test", queues=["default"], capacity=1, incarnation=uuid.uuid4().hex
    )
    outgoing.put_nowait(worker_pb2.WorkerMessage(hello=hello))

    async def requests() -> AsyncIterator[worker_pb2.WorkerMessage]:
        while True:
            yield await outgoing.get()

    async with grpc.aio.insecure_channel(registry) as channel:
        call = worker_pb2_grpc.WorkerRegistryStub(channel).Connect(requests())
        async for message in call:
            if message.WhichOneof("message") == "welcome":
                break
        if draining:
            outgoing.put_nowait(worker_pb2.WorkerMessage(draining=worker_pb2.Draining()))
            await asyncio.sleep(0.01)
        call.cancel()


def test_a_worker_whose_stream_ended_is_listed_as_gone(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(workers=0)
    n = 100

    async def sessions() -> None:
        for i in range(n):
            await connect_and_leave(cluster.registry_address, f"proto-{i:02d}", draining=i % 2 == 0)

    asyncio.run(sessions())

    def states() -> dict[str, str]:
        return {r["worker_id"]: r["state"] for r in cluster.fetch("SELECT worker_id, state FROM workers")}

    try:
        wait_until("every departed worker's row to be 'gone'", lambda: set(states().values()) == {"gone"}, 3)
    finally:
        counts = Counter(states().values())
        print(f"\nrows of {n} workers whose streams ended (half after Draining): {dict(counts)}")
    listed = schedctl(cluster, "workers", "list", "-o", "json")
    assert json.loads(listed.stdout) == [], listed.stdout


def test_workers_list_shows_an_idle_worker_with_no_load(make_cluster: MakeCluster, tmp_path: Path) -> None:
    # A long zombie threshold: the attempt must outlive the worker's first heartbeat, which comes late
    # (test_an_attempt_started_right_after_its_worker_connected_is_not_a_zombie).
    cluster = make_cluster(workers=1, service_env={"SCHEDD_ZOMBIE_THRESHOLD": "30"})
    flag = tmp_path / "go"
    register(cluster, tmp_path, one_task_dag("loaded", f'while [ ! -e "{flag}" ]; do sleep 0.1; done'))
    trigger(cluster, "loaded", "r1")

    def load() -> int:
        listed = schedctl(cluster, "workers", "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        return int(json.loads(listed.stdout)[0].get("running", 0))

    wait_until(
        "the worker to show a load of 1 while its task runs", lambda: load() == 1, LIVENESS, interval=0.3
    )
    flag.touch()
    assert wait_run_finished(cluster, "loaded", "r1") == "success"
    idle_since = time.monotonic()
    try:
        wait_until("the idle worker to show a load of 0", lambda: load() == 0, 3, interval=0.3)
    finally:
        print(f"\nload shown {time.monotonic() - idle_since:.1f}s after the worker went idle: {load()}")
