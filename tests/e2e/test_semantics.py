"""Airflow's scheduling semantics through the real services: retries with backoff, trigger rules, branching,
pools and priorities, concurrency limits, run timeouts and callbacks.

Every DAG is a YAML spec registered with ``schedctl dags register`` and triggered with ``schedctl runs
trigger``; what happened is read back from PostgreSQL (``task_instances``, ``task_attempts``,
``dag_runs``, ``outbox``), where each attempt records when its process started and ended. The cluster
(api, registry, scheduler, two workers of 4 slots) runs on a database of this module's own. Waits poll
with generous bounds; no assertion is about speed.

The helpers here (the cluster fixture, spec builders, polling) are shared with ``test_control``.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any, TypeVar

import pytest
import yaml

from schedd_devstack.postgres import create_database, drop_database, with_database
from schedd_devstack.services import Cluster
from tests.e2e.semantics_tasks import EVENTS_FILE_ENV
from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TASKS = "tests.e2e.semantics_tasks"
#: Bound for something that should take a second or two: generous, so a loaded machine passes.
LIVENESS = 45.0
#: How long a bug that makes something never happen is given before the test gives up on it.
NEVER = 15.0

T = TypeVar("T")

# --- a webhook receiver -----------------------------------------------------------------------------


class HookServer(ThreadingHTTPServer):
    """An HTTP server on 127.0.0.1 recording every JSON POST; paths in ``fail_first`` answer their first
    request with a 500."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HookHandler)
        self.lock = threading.Lock()
        #: (path, body, answered with an error)
        self.requests: list[tuple[str, dict[str, Any], bool]] = []
        self.fail_first: set[str] = set()
        self._failed: set[str] = set()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def accepted(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for p, body, failed in self.requests if p == path and not failed]

    def tried(self, path: str) -> int:
        with self.lock:
            return sum(1 for p, _, _ in self.requests if p == path)

    def record(self, path: str, body: dict[str, Any]) -> bool:
        """Record a request; whether to fail it."""
        with self.lock:
            fail = path in self.fail_first and path not in self._failed
            if fail:
                self._failed.add(path)
            self.requests.append((path, body, fail))
            return fail


class _HookHandler(BaseHTTPRequestHandler):
    server: HookServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        fail = self.server.record(self.path, body)
        self.send_response(500 if fail else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


# --- the cluster and how tests talk to it ------------------------------------------------------------

TIS = """
SELECT ti.id, ti.task_id, ti.state, ti.try_number, ti.max_tries, ti.next_retry_at, ti.error, ti.pool,
       ti.priority_weight, ti.queued_at, ti.started_at, ti.ended_at
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 AND r.run_id = $2
"""

ATTEMPTS = """
SELECT r.run_id, ti.task_id, a.try_number, a.state, a.error, a.claimed_at, a.started_at, a.ended_at
FROM task_attempts a JOIN task_instances ti ON ti.id = a.ti_id JOIN dag_runs r ON r.id = ti.run_pk
WHERE r.dag_id = $1 ORDER BY a.claimed_at
"""


@dataclass
class Env:
    cluster: RunningCluster
    #: scratch space for spec files, markers and pid files (visible to the workers: same machine)
    work: Path
    #: where the Python callback ``record_event`` appends events (the workers' environment names it)
    events_file: Path
    hook: HookServer
    #: DAG ids registered through ``register_once``
    registered: set[str] = field(default_factory=set)

    # schedctl

    def ctl(self, *args: str) -> CompletedProcess[str]:
        return self.cluster.schedctl(*args)

    def ok(self, *args: str) -> str:
        result = self.ctl(*args)
        assert result.returncode == 0, f"schedctl {' '.join(args)} -> {result.returncode}:\n{result.stderr}"
        return result.stdout

    def ok_json(self, *args: str) -> Any:
        return json.loads(self.ok("-o", "json", *args))

    def register(self, spec: dict[str, Any]) -> None:
        path = self.work / f"{spec['dag_id']}-{secrets.token_hex(3)}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        self.ok("dags", "register", str(path))

    def register_once(self, spec: dict[str, Any]) -> None:
        """Register ``spec`` unless a DAG of that id was registered this way before (parametrized tests)."""
        if spec["dag_id"] not in self.registered:
            self.register(spec)
            self.registered.add(spec["dag_id"])

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any] | None = None) -> None:
        self.ok("runs", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf or {}))

    def pool(self, name: str, slots: int) -> None:
        self.cluster.fetch("INSERT INTO pools (name, slots) VALUES ($1, $2)", name, slots)

    # the database

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        rows = self.cluster.fetch(
            "SELECT state, created_at, started_at, ended_at FROM dag_runs WHERE dag_id = $1 AND run_id = $2",
            dag_id,
            run_id,
        )
        assert len(rows) == 1, f"no run {dag_id}/{run_id}"
        return rows[0]

    def tis(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        return {r["task_id"]: r for r in self.cluster.fetch(TIS, dag_id, run_id)}

    def states(self, dag_id: str, run_id: str) -> dict[str, str]:
        return {t: r["state"] for t, r in self.tis(dag_id, run_id).items()}

    def attempts(
        self, dag_id: str, run_id: str | None = None, task_id: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            a
            for a in self.cluster.fetch(ATTEMPTS, dag_id)
            if (run_id is None or a["run_id"] == run_id) and (task_id is None or a["task_id"] == task_id)
        ]

    # waiting

    def wait_for(self, what: str, check: Callable[[], T | None], timeout: float = LIVENESS) -> T:
        """Poll ``check`` until it returns something truthy (returned); fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        interval = 0.05
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                self.cluster.assert_healthy()
                pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
            time.sleep(interval)
            interval = min(interval * 1.5, 0.5)

    def wait_state(
        self, dag_id: str, run_id: str, task_id: str, *states: str, timeout: float = LIVENESS
    ) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            row = self.tis(dag_id, run_id).get(task_id)
            return row if row is not None and row["state"] in states else None

        try:
            return self.wait_for(f"{dag_id}/{run_id} {task_id} to be {'/'.join(states)}", check, timeout)
        except pytest.fail.Exception:
            raise AssertionError(
                f"{dag_id}/{run_id} {task_id} is not {'/'.join(states)} after {timeout:g}s; run "
                f"{self.run(dag_id, run_id)['state']}, task states {self.states(dag_id, run_id)}"
            ) from None

    def wait_run(self, dag_id: str, run_id: str, *states: str, timeout: float = LIVENESS) -> dict[str, Any]:
        """Wait until the run is finished (or in one of ``states``); returns its row."""
        wanted = states or ("success", "failed")

        def check() -> dict[str, Any] | None:
            row = self.run(dag_id, run_id)
            return row if row["state"] in wanted else None

        try:
            return self.wait_for(f"run {dag_id}/{run_id} to be {'/'.join(wanted)}", check, timeout)
        except pytest.fail.Exception:
            raise AssertionError(
                f"run {dag_id}/{run_id} is {self.run(dag_id, run_id)['state']}, not {'/'.join(wanted)} after "
                f"{timeout:g}s; task states: {self.states(dag_id, run_id)}"
            ) from None

    def barrier(self) -> None:
        """Trigger a one-task DAG and wait for it: the scheduler has handled every notification sent
        before (runs are evaluated in batches as notifications arrive)."""
        self.register_once({"dag_id": "barrier", "tasks": [sh("t", "true")]})
        run_id = f"b{secrets.token_hex(4)}"
        self.trigger("barrier", run_id)
        assert self.wait_run("barrier", run_id)["state"] == "success"


def sh(task_id: str, command: str, *upstream: str, **options: Any) -> dict[str, Any]:
    return {"task_id": task_id, "upstream": list(upstream), "shell": {"command": command}, **options}


def py(task_id: str, function: str, *upstream: str, **options: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "upstream": list(upstream),
        "python": {"target": f"{TASKS}:{function}"},
        **options,
    }


def gated(gate: Path) -> str:
    """A shell command that waits until the file ``gate`` exists (bounded: it fails after about a minute),
    so a test decides when a task finishes instead of guessing with a sleep."""
    return f"i=0; while [ ! -e {gate} ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done"


def rule(name: str) -> str:
    return "TRIGGER_RULE_" + name.upper()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant (an end at the same instant as a start does not overlap)."""
    points = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1])
    )
    open_now = peak = 0
    for _, delta in points:
        open_now += delta
        peak = max(peak, open_now)
    return peak


@contextmanager
def semantics_env(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    """A cluster on a new database (dropped afterwards), with a webhook receiver and an events file for
    Python callbacks. Registries tell workers to heartbeat every second, so attempts the scheduler stops
    (a run timeout) are cancelled on the worker quickly."""
    name = f"t_{secrets.token_hex(8)}"
    create_database(database_url, name)
    url = with_database(database_url, name)
    work = tmp_path_factory.mktemp("semantics")
    events_file = work / "events.jsonl"
    events_file.touch()
    hook = HookServer()
    hook_thread = threading.Thread(target=hook.serve_forever, name="webhook", daemon=True)
    hook_thread.start()
    cluster = Cluster(
        url,
        etcd_endpoints,
        work / "logs",
        workers=2,
        worker_capacity=4,
        cwd=REPO,
        registry_env={"SCHEDD_HEARTBEAT_INTERVAL": "1"},
        # The callbacks (run by the workers' warm Python children) find the file through it.
        worker_env={EVENTS_FILE_ENV: str(events_file), "SCHEDD_TASK_ENV_ALLOW": EVENTS_FILE_ENV},
    )
    try:
        began = time.monotonic()
        cluster.start()
        running = RunningCluster(cluster, url, work / "logs", time.monotonic() - began)
        yield Env(running, work, events_file, hook)
        running.assert_healthy()
    finally:
        cluster.stop()
        hook.shutdown()
        hook.server_close()
        drop_database(database_url, name)
    assert not [p for p in cluster.processes if p.alive], "processes left running"


@pytest.fixture(scope="module")
def env(database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with semantics_env(database_url, etcd_endpoints, tmp_path_factory) as e:
        yield e


# --- retries ----------------------------------------------------------------------------------------


def test_retries_back_off_exponentially_then_fail_the_task_its_downstream_and_the_run(env: Env) -> None:
    env.register(
        {
            "dag_id": "sem_retry",
            "tasks": [
                sh(
                    "flaky",
                    "echo try $SCHEDD_TRY_NUMBER; exit 3",
                    retries=2,
                    retry_delay="1s",
                    retry_exponential_backoff=True,
                    max_retry_delay="60s",
                ),
                sh("after", "true", "flaky"),
            ],
        }
    )
    env.trigger("sem_retry", "r1")
    assert env.wait_run("sem_retry", "r1")["state"] == "failed"

    tis = env.tis("sem_retry", "r1")
    assert tis["flaky"]["state"] == "failed"
    assert (tis["flaky"]["try_number"], tis["flaky"]["max_tries"]) == (3, 3)
    assert tis["after"]["state"] == "upstream_failed"
    assert tis["after"]["try_number"] == 0, "a task whose upstream failed never runs"

    attempts = env.attempts("sem_retry", "r1", "flaky")
    assert [(a["try_number"], a["state"]) for a in attempts] == [(1, "failed"), (2, "failed"), (3, "failed")]
    gaps = [
        (attempts[n]["started_at"] - attempts[n - 1]["ended_at"]).total_seconds()
        for n in range(1, len(attempts))
    ]
    # After try n the delay is 1s * 2**(n-1), jittered into [0.75, 1.0] of that: at least 0.75s, then 1.5s.
    assert gaps[0] >= 0.75 - 0.01, gaps
    assert gaps[1] >= 1.5 - 0.01, gaps
    assert gaps[1] > gaps[0], f"the delay did not grow: {gaps}"
    assert all(g < LIVENESS for g in gaps), gaps
    assert env.attempts("sem_retry", "r1", "after") == []


# --- trigger rules ----------------------------------------------------------------------------------

RULES = (
    "all_success",
    "all_failed",
    "all_done",
    "one_success",
    "one_failed",
    "none_failed",
    "none_failed_min_one_success",
    "none_skipped",
    "always",
)
#: What a task with each rule does when its upstream tasks are (success, failed) ...
WITH_A_FAILURE = {
    "all_success": "upstream_failed",
    "all_failed": "skipped",
    "all_done": "success",
    "one_success": "success",
    "one_failed": "success",
    "none_failed": "upstream_failed",
    "none_failed_min_one_success": "upstream_failed",
    "none_skipped": "success",
    "always": "success",
}
#: ... and (success, skipped).
WITH_A_SKIP = {
    "all_success": "skipped",
    "all_failed": "skipped",
    "all_done": "success",
    "one_success": "success",
    "one_failed": "skipped",
    "none_failed": "success",
    "none_failed_min_one_success": "success",
    "none_skipped": "skipped",
    "always": "success",
}


def test_one_failed_cleanup_runs_only_when_its_upstream_fails(env: Env) -> None:
    env.register(
        {
            "dag_id": "sem_cleanup",
            "tasks": [
                sh("bad", "exit 1"),
                sh("good", "true"),
                sh("cleanup_bad", "true", "bad", trigger_rule=rule("one_failed")),
                sh("cleanup_good", "true", "good", trigger_rule=rule("one_failed")),
            ],
        }
    )
    env.trigger("sem_cleanup", "r1")
    run = env.wait_run("sem_cleanup", "r1")
    assert env.states("sem_cleanup", "r1") == {
        "bad": "failed",
        "good": "success",
        "cleanup_bad": "success",
        "cleanup_good": "skipped",
    }
    # Airflow's leaf semantics: the leaves (the cleanups) succeeded or were skipped, so the run succeeds
    # although 'bad' failed.
    assert run["state"] == "success"
    assert env.attempts("sem_cleanup", "r1", "cleanup_good") == []


def test_every_trigger_rule_after_a_failure_and_after_a_skip(env: Env) -> None:
    tasks = [
        sh("ok", "true"),
        sh("bad", "exit 1"),
        py("br", "choose", branch=True),
        sh("x", "true", "br"),
        sh("y", "true", "br"),
    ]
    for name in RULES:
        tasks.append(sh(f"f_{name}", "true", "ok", "bad", trigger_rule=rule(name)))
        tasks.append(sh(f"s_{name}", "true", "x", "y", trigger_rule=rule(name)))
    env.register({"dag_id": "sem_rules", "param_schemas": {"follow": {"required": True}}, "tasks": tasks})
    env.trigger("sem_rules", "r1", {"follow": "x"})
    run = env.wait_run("sem_rules", "r1")
    states = env.states("sem_rules", "r1")
    assert (states["ok"], states["bad"], states["br"], states["x"], states["y"]) == (
        "success",
        "failed",
        "success",
        "success",
        "skipped",
    )
    assert {n: states[f"f_{n}"] for n in RULES} == WITH_A_FAILURE
    assert {n: states[f"s_{n}"] for n in RULES} == WITH_A_SKIP
    ran = {a["task_id"] for a in env.attempts("sem_rules", "r1")}
    assert ran == {"ok", "bad", "br", "x"} | {
        f"{p}_{n}"
        for p, table in (("f", WITH_A_FAILURE), ("s", WITH_A_SKIP))
        for n in RULES
        if table[n] == "success"
    }
    # Leaves upstream_failed (f_all_success...): the run fails.
    assert run["state"] == "failed"


# --- branching --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("follow", "expected", "run_state"),
    [
        (
            "left",
            {
                "left": "success",
                "left2": "success",
                "right": "skipped",
                "right2": "skipped",
                "join": "success",
            },
            "success",
        ),
        (
            ["left", "right"],
            {
                "left": "success",
                "left2": "success",
                "right": "success",
                "right2": "success",
                "join": "success",
            },
            "success",
        ),
        (
            [],
            {
                "left": "skipped",
                "left2": "skipped",
                "right": "skipped",
                "right2": "skipped",
                "join": "skipped",
            },
            "success",
        ),
    ],
    ids=["one", "both", "none"],
)
def test_branch_follows_the_returned_ids_and_skips_the_rest(
    env: Env, follow: Any, expected: dict[str, str], run_state: str
) -> None:
    env.register_once(
        {
            "dag_id": "sem_branch",
            "param_schemas": {"follow": {"required": True}},
            "tasks": [
                py("br", "choose", branch=True),
                sh("left", "true", "br"),
                sh("left2", "true", "left"),
                sh("right", "true", "br"),
                sh("right2", "true", "right"),
                sh("join", "true", "left2", "right2", trigger_rule=rule("none_failed_min_one_success")),
            ],
        }
    )
    run_id = (
        "follow_" + ("_".join(follow) if isinstance(follow, list) else follow) if follow else "follow_nothing"
    )
    env.trigger("sem_branch", run_id, {"follow": follow})
    run = env.wait_run("sem_branch", run_id)
    states = env.states("sem_branch", run_id)
    assert states.pop("br") == "success"
    assert states == expected
    assert run["state"] == run_state
    ran = {a["task_id"] for a in env.attempts("sem_branch", run_id)}
    assert ran == {"br"} | {t for t, s in expected.items() if s == "success"}


# --- pools and priorities ---------------------------------------------------------------------------


def _intervals(rows: list[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    return [(a["started_at"], a["ended_at"]) for a in rows]


def test_a_pool_of_two_never_runs_more_than_two(env: Env) -> None:
    env.pool("sem_two", 2)
    env.register(
        {"dag_id": "sem_pool", "tasks": [sh(f"t{i}", "sleep 0.3", pool="sem_two") for i in range(10)]}
    )
    env.trigger("sem_pool", "r1")
    assert env.wait_run("sem_pool", "r1")["state"] == "success"
    attempts = env.attempts("sem_pool", "r1")
    assert len(attempts) == 10 and all(a["state"] == "success" for a in attempts)
    # Workers have 8 slots between them: without the pool, up to 8 of these would overlap.
    assert max_overlap(_intervals(attempts)) <= 2


def test_a_two_slot_task_is_not_starved_by_one_slot_tasks(env: Env) -> None:
    env.pool("sem_two_b", 2)
    absolute = "WEIGHT_RULE_ABSOLUTE"
    env.register(
        {
            "dag_id": "sem_big",
            "tasks": [
                sh("first", "sleep 0.5", pool="sem_two_b", priority_weight=30, weight_rule=absolute),
                sh(
                    "big",
                    "sleep 0.3",
                    pool="sem_two_b",
                    pool_slots=2,
                    priority_weight=20,
                    weight_rule=absolute,
                ),
                *(
                    sh(f"small{i}", "sleep 0.3", pool="sem_two_b", priority_weight=10, weight_rule=absolute)
                    for i in range(4)
                ),
            ],
        }
    )
    env.trigger("sem_big", "r1")
    assert env.wait_run("sem_big", "r1")["state"] == "success"
    by_task = {a["task_id"]: a for a in env.attempts("sem_big", "r1")}
    big = by_task.pop("big")
    # While 'first' holds one slot, 'big' (two slots) heads the pool: no small task may take the free slot
    # ahead of it, and nothing shares the pool with it while it runs.
    for task_id, other in by_task.items():
        assert (
            max_overlap([(big["started_at"], big["ended_at"]), (other["started_at"], other["ended_at"])]) == 1
        ), f"{task_id} ran alongside the two-slot task"
        if task_id.startswith("small"):
            assert other["started_at"] >= big["ended_at"], f"{task_id} jumped ahead of the two-slot task"
    assert max_overlap(_intervals([big, *by_task.values()])) <= 2


def test_higher_priority_dag_runs_first_in_a_shared_pool(env: Env) -> None:
    env.pool("sem_one", 1)
    gate = env.work / "priority.gate"
    absolute = "WEIGHT_RULE_ABSOLUTE"
    env.register(
        {
            "dag_id": "sem_low",
            "tasks": [
                sh(f"l{i}", gated(gate), pool="sem_one", priority_weight=1, weight_rule=absolute)
                for i in range(3)
            ],
        }
    )
    env.register(
        {
            "dag_id": "sem_high",
            "tasks": [
                *(
                    sh(f"h{i}", "sleep 0.2", pool="sem_one", priority_weight=10, weight_rule=absolute)
                    for i in range(3)
                ),
                # Outside the pool: keeps the run busy after its last pool task (see the xfail test below).
                sh("done", "true", "h0", "h1", "h2"),
            ],
        }
    )
    env.trigger("sem_low", "r1")
    env.wait_for(
        "a low-priority task to hold the slot", lambda: "running" in env.states("sem_low", "r1").values()
    )
    env.trigger("sem_high", "r1")  # later logical date: FIFO alone would run every low task first
    for h in ("h0", "h1", "h2"):
        env.wait_state("sem_high", "r1", h, "scheduled")
    gate.touch()
    assert env.wait_run("sem_high", "r1")["state"] == "success", env.attempts("sem_high", "r1")
    assert env.wait_run("sem_low", "r1")["state"] == "success", env.attempts("sem_low", "r1")

    high = [a for a in env.attempts("sem_high", "r1") if a["task_id"] != "done"]
    low = env.attempts("sem_low", "r1")
    assert len(high) == 3 and len(low) == 3
    first_low, *later_low = low
    last_high = max(a["ended_at"] for a in high)
    assert all(a["started_at"] >= first_low["ended_at"] for a in high)
    for a in later_low:
        assert a["started_at"] >= last_high, f"low {a['task_id']} ran before the high-priority tasks"
    assert max_overlap(_intervals(high + low)) == 1


def test_second_run_gets_the_pool_slot_when_the_first_run_ends(env: Env) -> None:
    env.pool("sem_stuck_pool", 1)
    gate = env.work / "stuck.gate"
    env.register({"dag_id": "sem_stuck", "tasks": [sh("t", gated(gate), pool="sem_stuck_pool")]})
    env.trigger("sem_stuck", "r1")
    env.wait_state("sem_stuck", "r1", "t", "running")
    env.trigger("sem_stuck", "r2")
    env.wait_state("sem_stuck", "r2", "t", "scheduled")
    gate.touch()
    try:
        assert env.wait_run("sem_stuck", "r1")["state"] == "success"
        # r2's task needs nothing but the slot r1 just gave back: it runs within seconds.
        assert env.wait_run("sem_stuck", "r2", timeout=NEVER)["state"] == "success"
    finally:
        if env.run("sem_stuck", "r2")["state"] not in ("success", "failed"):
            env.ok("runs", "cancel", "sem_stuck/r2")


# --- concurrency limits -----------------------------------------------------------------------------


def test_max_active_runs_keeps_the_second_run_queued_until_the_first_ends(env: Env) -> None:
    gate = env.work / "mar.gate"
    env.register({"dag_id": "sem_mar", "max_active_runs": 1, "tasks": [sh("t", gated(gate))]})
    env.trigger("sem_mar", "r1")
    env.trigger("sem_mar", "r2")
    env.wait_state("sem_mar", "r1", "t", "running")
    env.barrier()  # r2's notification has been handled
    assert env.run("sem_mar", "r2")["state"] == "queued"
    assert env.tis("sem_mar", "r2") == {}, "a run waiting for max_active_runs must not be materialised"
    gate.touch()
    first = env.wait_run("sem_mar", "r1")
    second = env.wait_run("sem_mar", "r2")
    assert first["state"] == second["state"] == "success"
    assert second["started_at"] >= first["ended_at"]
    (a1,) = env.attempts("sem_mar", "r1")
    (a2,) = env.attempts("sem_mar", "r2")
    assert a2["started_at"] >= a1["ended_at"]


def test_max_active_instances_serialises_a_task_across_runs(env: Env) -> None:
    env.register(
        {
            "dag_id": "sem_mai",
            "tasks": [
                sh("t", "sleep 0.5", max_active_instances=1),
                sh("free", "sleep 0.5"),
                # Keeps each run busy after 't' (see the xfail test of the pool slot above).
                sh("after", "true", "t"),
            ],
        }
    )
    env.trigger("sem_mai", "r1")
    env.trigger("sem_mai", "r2")
    for run_id in ("r1", "r2"):
        assert env.wait_run("sem_mai", run_id)["state"] == "success"
    attempts = env.attempts("sem_mai")
    assert max_overlap(_intervals([a for a in attempts if a["task_id"] == "t"])) == 1
    # The unlimited task of both runs was not held back.
    assert len([a for a in attempts if a["task_id"] == "free"]) == 2


# --- run timeout ------------------------------------------------------------------------------------


def test_dagrun_timeout_fails_the_run_stops_the_running_attempt_and_skips_the_rest(env: Env) -> None:
    pid_file = env.work / "timeout.pid"
    env.register(
        {
            "dag_id": "sem_timeout",
            "dagrun_timeout": "3s",
            "tasks": [
                sh("slow", f"echo $$ > {pid_file}; exec sleep 30"),
                sh("after", "true", "slow"),
                # Its retry pokes the leader's deadline timer after the run started, so the timer knows
                # the run's deadline (see test_dagrun_timeout_is_enforced_without_other_activity).
                sh("poke", "exit 1", retries=1, retry_delay="0.5s"),
            ],
        }
    )
    env.trigger("sem_timeout", "r1")
    env.wait_for("the slow task's pid", lambda: pid_file.exists() and pid_file.read_text().strip())
    pid = int(pid_file.read_text())
    run = env.wait_run("sem_timeout", "r1")
    assert run["state"] == "failed"
    assert run["ended_at"] - run["started_at"] >= timedelta(seconds=3)
    tis = env.tis("sem_timeout", "r1")
    assert tis["slow"]["state"] == "failed"
    assert tis["slow"]["error"] == "the run timed out"
    assert tis["after"]["state"] == "skipped"
    (attempt,) = env.attempts("sem_timeout", "r1", "slow")
    assert attempt["state"] == "failed" and attempt["error"] == "the run timed out"
    # The worker is told to stop it (on its next heartbeat) and kills the process.
    env.wait_for(f"the timed-out task's process {pid} to end", lambda: not pid_alive(pid))
    # Its late report (killed) must not change the recorded outcome.
    env.barrier()
    assert env.tis("sem_timeout", "r1")["slow"]["state"] == "failed"
    assert env.run("sem_timeout", "r1")["state"] == "failed"


def test_dagrun_timeout_is_enforced_without_other_activity(env: Env) -> None:
    # Precondition: the timer has just gone idle. A retry wakes it; once that retry has run, nothing is
    # left for it to wait for.
    env.register({"dag_id": "sem_quiet", "tasks": [sh("t", "exit 1", retries=1, retry_delay="0.2s")]})
    env.trigger("sem_quiet", "r1")
    env.wait_run("sem_quiet", "r1")
    assert env.cluster.fetchval("SELECT count(*) FROM task_instances WHERE state = 'up_for_retry'") == 0
    pid_file = env.work / "idle_timeout.pid"
    env.register(
        {
            "dag_id": "sem_timeout_idle",
            "dagrun_timeout": "2s",
            "tasks": [sh("slow", f"echo $$ > {pid_file}; exec sleep 60"), sh("after", "true", "slow")],
        }
    )
    env.trigger("sem_timeout_idle", "r1")
    try:
        run = env.wait_run("sem_timeout_idle", "r1", timeout=2 + NEVER)
        assert run["state"] == "failed"
    finally:
        if env.run("sem_timeout_idle", "r1")["state"] not in ("success", "failed"):
            env.ok("runs", "cancel", "sem_timeout_idle/r1")


# --- callbacks --------------------------------------------------------------------------------------

OUTBOX = "SELECT id, topic, payload, attempts, delivered_at, last_error, failed_at FROM outbox ORDER BY id"


def _outbox(env: Env, dag_id: str) -> list[dict[str, Any]]:
    rows = env.cluster.fetch(OUTBOX)
    for r in rows:
        if isinstance(r["payload"], str):
            r["payload"] = json.loads(r["payload"])
    return [r for r in rows if r["payload"].get("dag_id") == dag_id]


def recorded_events(env: Env) -> list[dict[str, Any]]:
    """What the Python callback ``record_event`` wrote, in order."""
    return [json.loads(line) for line in env.events_file.read_text().splitlines() if line.strip()]


def test_webhook_and_python_callbacks_are_delivered_from_the_outbox(env: Env) -> None:
    hook = env.hook
    env.register(
        {
            "dag_id": "sem_cb",
            "on_failure": [{"webhook_url": hook.url("/sem_cb/run-failure")}],
            "tasks": [
                sh("ok", "true", on_success=[{"webhook_url": hook.url("/sem_cb/task-success")}]),
                sh(
                    "flaky",
                    "exit 4",
                    retries=1,
                    retry_delay="0.2s",
                    on_retry=[{"webhook_url": hook.url("/sem_cb/task-retry")}],
                    on_failure=[
                        {"webhook_url": hook.url("/sem_cb/task-failure")},
                        {"python": {"target": f"{TASKS}:record_event"}},
                    ],
                ),
            ],
        }
    )
    env.trigger("sem_cb", "r1")
    assert env.wait_run("sem_cb", "r1")["state"] == "failed"

    def delivered() -> list[dict[str, Any]] | None:
        rows = _outbox(env, "sem_cb")
        return rows if len(rows) == 4 and all(r["delivered_at"] for r in rows) else None

    rows = env.wait_for("4 delivered sem_cb events in the outbox", delivered)
    assert sorted((r["topic"], r["payload"]["event"], r["payload"].get("task_id")) for r in rows) == [
        ("run_callback", "failure", None),
        ("task_callback", "failure", "flaky"),
        ("task_callback", "retry", "flaky"),
        ("task_callback", "success", "ok"),
    ]
    assert all(r["failed_at"] is None and r["attempts"] >= 1 for r in rows)

    def one(path: str) -> dict[str, Any]:
        bodies = hook.accepted(path)
        assert bodies, f"nothing POSTed to {path}"
        assert all(b == bodies[0] for b in bodies), f"differing deliveries of one event: {bodies}"
        return bodies[0]

    common = {"dag_id": "sem_cb", "run_id": "r1"}
    success = one("/sem_cb/task-success")
    assert success.items() >= {**common, "event": "success", "task_id": "ok", "try_number": 1}.items()
    retry = one("/sem_cb/task-retry")
    assert retry.items() >= {**common, "event": "retry", "task_id": "flaky", "try_number": 1}.items()
    failure = one("/sem_cb/task-failure")
    assert failure.items() >= {**common, "event": "failure", "task_id": "flaky", "try_number": 2}.items()
    assert failure.get("error"), failure
    run_failure = one("/sem_cb/run-failure")
    assert run_failure.items() >= {**common, "event": "failure"}.items()
    assert "task_id" not in run_failure
    assert len({b["event_id"] for b in (success, retry, failure, run_failure)}) == 4
    assert {r["id"] for r in rows} == {b["event_id"] for b in (success, retry, failure, run_failure)}

    # The Python callback ran on a worker with the event as its params.
    events = [e for e in recorded_events(env) if e.get("dag_id") == "sem_cb"]
    assert len(events) >= 1, events
    assert events[0]["event"] == "failure" and events[0]["task_id"] == "flaky" and events[0]["run_id"] == "r1"
    assert int(events[0]["try_number"]) == 2


def test_run_success_callbacks_and_a_failing_webhook_is_retried(env: Env) -> None:
    hook = env.hook
    hook.fail_first.add("/sem_cb_ok/run-success")
    env.register(
        {
            "dag_id": "sem_cb_ok",
            "on_success": [{"webhook_url": hook.url("/sem_cb_ok/run-success")}],
            "tasks": [sh("a", "true", on_success=[{"python": {"target": f"{TASKS}:record_event"}}])],
        }
    )
    env.trigger("sem_cb_ok", "r1")
    assert env.wait_run("sem_cb_ok", "r1")["state"] == "success"

    def delivered() -> list[dict[str, Any]] | None:
        rows = _outbox(env, "sem_cb_ok")
        return rows if len(rows) == 2 and all(r["delivered_at"] for r in rows) else None

    rows = {r["topic"]: r for r in env.wait_for("the sem_cb_ok events to be delivered", delivered)}
    run_row = rows["run_callback"]
    assert run_row["payload"]["event"] == "success"
    # The webhook answered 500 the first time: the event was delivered again (at least once).
    assert run_row["attempts"] >= 2, run_row
    assert run_row["last_error"], run_row
    assert hook.tried("/sem_cb_ok/run-success") >= 2
    (body,) = hook.accepted("/sem_cb_ok/run-success")
    assert body.items() >= {"event": "success", "dag_id": "sem_cb_ok", "run_id": "r1"}.items()
    assert rows["task_callback"]["attempts"] == 1

    events = [e for e in recorded_events(env) if e.get("dag_id") == "sem_cb_ok"]
    assert [(e["event"], e["task_id"], e["run_id"]) for e in events] == [("success", "a", "r1")]
