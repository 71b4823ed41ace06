"""The task database role, attacked on a real cluster: it commits only its own attempt, and every
NOTIFY it can send is a hint only.

Task code of a transactional task holds a connection as the task role (a member of
``schedd_tasks``). Attempt and task instance ids are visible to viewers, so the attacker here knows
them all: it tries to commit another task's running attempt through ``schedd_commit_attempt``
(without the attempt's commit secret, or through the function's older form), and each try is
refused and changes nothing, while the attempt's own process still commits with its secret. Any
role may ``pg_notify`` and LISTEN on any channel: a forged drain drains no worker, a forged cancel
stops nothing, garbage on every channel leaves every service working, and listening while a user
cancels a run learns no attempt id (and the cancelled attempt still stops).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import pytest

from schedd_core.database_url import asyncpg_dsn
from schedd_devstack.services import Cluster
from schedd_store import channels
from tests.fixtures.services import cluster_on_own_database, schedctl
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Bound (seconds) on waiting for a state the cluster reaches on its own.
LIVENESS = 60.0

ATTEMPT = """
SELECT ti.id, ti.try_number, ti.attempt_id, ti.worker_id, ti.state, ti.result, a.state AS attempt_state
FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk
JOIN task_attempts a ON a.attempt_id = ti.attempt_id
WHERE r.dag_id = $1 AND r.run_id = $2
"""


@pytest.fixture(scope="module")
def cluster(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("task_role"),
        workers=1,
        cwd=REPO_ROOT,
    ) as c:
        c.fetch("CREATE TABLE tx_demo (key text PRIMARY KEY, attempt text NOT NULL)")
        c.fetch("GRANT SELECT, INSERT ON tx_demo TO schedd_tasks")
        yield c
    c.release_election()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("task_role_work")


# --- helpers -----------------------------------------------------------------------------------------


def as_task_role(cluster: Cluster, query: str, *args: object) -> Any:
    """``fetchval(query)`` on a connection of the task role; the database's error, if any, returned."""

    async def run() -> Any:
        conn = await asyncpg.connect(asyncpg_dsn(cluster.task_database_url))
        try:
            return await conn.fetchval(query, *args)
        except asyncpg.PostgresError as exc:
            return exc
        finally:
            await conn.close()

    return asyncio.run(run())


def notify_as_task_role(cluster: Cluster, notifications: list[tuple[str, str]]) -> None:
    """Send each ``(channel, payload)`` from the task role, each in its own transaction."""

    async def run() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(cluster.task_database_url))
        try:
            for channel, payload in notifications:
                await conn.execute("SELECT pg_notify($1, $2)", channel, payload)
        finally:
            await conn.close()

    asyncio.run(run())


def ctl(cluster: Cluster, *args: str) -> str:
    result = schedctl(cluster.api_address, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def register(cluster: Cluster, work: Path, spec: dict[str, Any]) -> None:
    path = work / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    ctl(cluster, "dags", "register", str(path))


def attempt_of(cluster: Cluster, dag_id: str, run_id: str) -> dict[str, Any]:
    (row,) = cluster.fetch(ATTEMPT, dag_id, run_id)
    return row


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class HeldTask:
    """A shell task that runs until its release file exists (at most ``LIVENESS`` seconds)."""

    def __init__(self, cluster: Cluster, work: Path, dag_id: str) -> None:
        self.cluster, self.dag_id = cluster, dag_id
        self.pid_file, self.release_file = work / f"{dag_id}.pid", work / f"{dag_id}.release"
        loops = int(LIVENESS / 0.05)
        command = (
            f"echo $$ > {self.pid_file}; for i in $(seq {loops}); do "
            f"[ -e {self.release_file} ] && exit 0; sleep 0.05; done; exit 1"
        )
        register(
            cluster, work, {"dag_id": dag_id, "tasks": [{"task_id": "hold", "shell": {"command": command}}]}
        )
        ctl(cluster, "runs", "trigger", dag_id, "--run-id", "r1")
        wait_until(
            f"{dag_id} to run",
            lambda: self.pid_file.exists() and self.pid_file.read_text().strip() != "",
            LIVENESS,
        )
        self.pid = int(self.pid_file.read_text())
        self.attempt = attempt_of(cluster, dag_id, "r1")
        assert self.attempt["state"] == "running"

    def release_and_wait(self) -> str:
        """Let the task end; the state its run ends in."""
        self.release_file.touch()
        return run_outcome(self.cluster, self.dag_id, "r1")


def run_outcome(cluster: Cluster, dag_id: str, run_id: str) -> str:
    query = "SELECT state FROM dag_runs WHERE dag_id = $1 AND run_id = $2"
    wait_until(
        f"{dag_id}/{run_id} to end",
        lambda: cluster.fetchval(query, dag_id, run_id) in ("success", "failed"),
        LIVENESS,
    )
    return str(cluster.fetchval(query, dag_id, run_id))


def run_a_task(cluster: Cluster, work: Path, dag_id: str) -> str:
    """Register and run a one-task DAG to its end: the state its run ended in."""
    register(cluster, work, {"dag_id": dag_id, "tasks": [{"task_id": "t", "shell": {"command": "true"}}]})
    ctl(cluster, "runs", "trigger", dag_id, "--run-id", "r1")
    return run_outcome(cluster, dag_id, "r1")


# --- committing another task's attempt ---------------------------------------------------------------


def test_the_task_role_cannot_commit_another_tasks_running_attempt(cluster: Cluster, work: Path) -> None:
    victim = HeldTask(cluster, work, "tr_victim")
    ti, attempt, try_number = victim.attempt["id"], victim.attempt["attempt_id"], victim.attempt["try_number"]
    forged = '{"forged": true}'

    # The function's older form took no secret: it is gone.
    old_form = as_task_role(
        cluster, "SELECT schedd_commit_attempt($1, $2, $3, now(), $4::jsonb)", ti, attempt, try_number, forged
    )
    assert isinstance(old_form, asyncpg.UndefinedFunctionError), old_form

    # Guessed secrets: empty, random, the attempt's own id, its idempotency key.
    for guess in ["", str(uuid.uuid4()), str(attempt), "tr_victim/r1/hold"]:
        refused = as_task_role(
            cluster,
            "SELECT schedd_commit_attempt($1, $2, $3, $4, now(), $5::jsonb)",
            ti,
            attempt,
            try_number,
            guess,
            forged,
        )
        assert isinstance(refused, asyncpg.InsufficientPrivilegeError), refused
        assert "p_secret is not the commit secret of attempt" in str(refused)

    # Nor can it read the stored hash.
    hidden = as_task_role(cluster, "SELECT commit_secret_hash FROM task_attempts LIMIT 1")
    assert isinstance(hidden, asyncpg.InsufficientPrivilegeError), hidden

    after = attempt_of(cluster, "tr_victim", "r1")
    assert (after["state"], after["attempt_state"], after["result"]) == ("running", "running", None)
    assert cluster.fetchval("SELECT count(*) FROM outbox WHERE payload->>'ti_id' = $1", str(ti)) == 0
    assert pid_alive(victim.pid)
    assert victim.release_and_wait() == "success"


def test_a_transactional_task_commits_its_own_attempt_with_its_secret(cluster: Cluster, work: Path) -> None:
    register(
        cluster,
        work,
        {
            "dag_id": "tr_tx",
            "tasks": [
                {
                    "task_id": "t",
                    "transactional": True,
                    "python": {"target": "tests.integration.tx_tasks:write_row"},
                }
            ],
        },
    )
    ctl(cluster, "runs", "trigger", "tr_tx", "--run-id", "r1")
    assert run_outcome(cluster, "tr_tx", "r1") == "success"
    row = attempt_of(cluster, "tr_tx", "r1")
    assert cluster.fetch("SELECT key, attempt FROM tx_demo") == [
        {"key": "tr_tx/r1/t", "attempt": str(row["attempt_id"])}
    ]
    stored = cluster.fetchval(
        "SELECT commit_secret_hash FROM task_attempts WHERE attempt_id = $1", row["attempt_id"]
    )
    assert len(stored) == 32  # a SHA-256, never the secret itself


def test_the_commit_secret_is_not_in_the_tasks_environment(cluster: Cluster, work: Path) -> None:
    target = "tests.security.task_role_tasks:environment_digests"
    register(
        cluster,
        work,
        {
            "dag_id": "tr_env",
            "tasks": [{"task_id": "t", "transactional": True, "python": {"target": target}}],
        },
    )
    ctl(cluster, "runs", "trigger", "tr_env", "--run-id", "r1")
    assert run_outcome(cluster, "tr_env", "r1") == "success"
    row = attempt_of(cluster, "tr_env", "r1")
    stored = cluster.fetchval(
        "SELECT commit_secret_hash FROM task_attempts WHERE attempt_id = $1", row["attempt_id"]
    )
    assert row["result"] and stored.hex() not in row["result"]


# --- notifications are hints ------------------------------------------------------------------------


def test_a_forged_drain_notification_drains_no_worker(cluster: Cluster, work: Path) -> None:
    (worker_id,) = [
        r["worker_id"] for r in cluster.fetch("SELECT worker_id FROM workers WHERE state = 'active'")
    ]
    notify_as_task_role(cluster, [(channels.WORKERS, worker_id)])

    # The registry read the database and told the worker nothing: it still takes work.
    assert run_a_task(cluster, work, "tr_after_drain") == "success"
    state = cluster.fetch("SELECT state, drain_requested FROM workers WHERE worker_id = $1", worker_id)
    assert state == [{"state": "active", "drain_requested": False}]
    assert not cluster.dead()


def test_a_forged_cancel_notification_stops_nothing(cluster: Cluster, work: Path) -> None:
    held = HeldTask(cluster, work, "tr_cancel_target")
    a = held.attempt
    notify_as_task_role(
        cluster,
        [
            (channels.CANCEL, f"{a['worker_id']} {a['id']} {a['attempt_id']}"),  # the former payload form
            (channels.CANCEL, str(a["id"])),  # the task instance, as a real cancel names it
        ],
    )
    # Later notifications are handled after these: a run through the registry passes them by.
    assert run_a_task(cluster, work, "tr_after_cancel") == "success"
    assert pid_alive(held.pid)
    assert attempt_of(cluster, "tr_cancel_target", "r1")["state"] == "running"
    assert held.release_and_wait() == "success"


GARBAGE = [
    "",
    " ",
    "\n\n",
    "x y z w",
    "1 2",
    "-1",
    "0",
    "²",
    "99999999999999999999",
    "9223372036854775808",
    "1/99999999999999999999",
    "1,,x,2",
    "\N{PILE OF POO}" * 100,
    "9" * 7000,
]
LISTENED = [
    channels.RUNS,
    channels.RUNS_HANDED_OFF,
    channels.QUEUED,
    channels.LOST,
    channels.WORKERS,
    channels.OUTBOX,
    channels.CANCEL,
    channels.DAGS,
    channels.BACKFILLS,
]


def test_garbage_notifications_on_every_channel_leave_every_service_working(
    cluster: Cluster, work: Path
) -> None:
    term = cluster.fence()
    notify_as_task_role(cluster, [(channel, payload) for channel in LISTENED for payload in GARBAGE])
    assert run_a_task(cluster, work, "tr_after_garbage") == "success"
    assert cluster.fence() == term
    assert not cluster.dead()
    (worker,) = cluster.fetch("SELECT state, drain_requested FROM workers")
    assert worker == {"state": "active", "drain_requested": False}


def test_listening_during_a_cancel_learns_no_attempt_id(cluster: Cluster, work: Path) -> None:
    received: list[str] = []

    async def listen_while_cancelling() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(cluster.task_database_url))
        try:
            await conn.add_listener(channels.CANCEL, lambda _c, _p, _ch, payload: received.append(payload))
            held = await asyncio.to_thread(HeldTask, cluster, work, "tr_cancelled")
            await asyncio.to_thread(ctl, cluster, "runs", "cancel", "tr_cancelled/r1")
            deadline = time.monotonic() + LIVENESS
            while not received:
                assert time.monotonic() < deadline, "no cancel notification came"
                await asyncio.sleep(0.05)
        finally:
            await conn.close()
        # The cancelled attempt's process still ends: the registry read what to stop.
        await asyncio.to_thread(
            wait_until,
            f"the cancelled task's process {held.pid} to end",
            lambda: not pid_alive(held.pid),
            LIVENESS,
        )
        attempt = str(held.attempt["attempt_id"])
        assert all(attempt not in payload for payload in received), received
        assert received == [str(held.attempt["id"])]

    asyncio.run(listen_while_cancelling())
