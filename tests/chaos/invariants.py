"""What every fault test checks afterwards, from the tasks' own marks and from the database.

Marked tasks append ``<attempt id> <wall-clock seconds>`` lines to ``$MARKS/<run>.<task>`` every
50 ms while they run (and from a background child, so a grandchild that outlived its worker would
show). The checks:

- no two attempts of one task instance overlap: the last mark of an attempt precedes the first
  mark of the next;
- no task starts before its upstream tasks finished (all_success edges): its first mark follows
  the last mark of every upstream task;
- the fence token never goes down (sampled during the test), and scheduler passes commit in
  token order (a deposed term writes nothing after a newer one did);
- every run a client was told was created exists, and every run settles (success, nothing left
  running or queued) once the fault is over.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster


def marked_command(seconds: float) -> str:
    """A shell task that marks every 50 ms for ``seconds``, from a background child of its shell."""
    return (
        'f="$MARKS/$SCHEDD_RUN_ID.$SCHEDD_TASK_ID"; '
        f"end=$(( $(date +%s%N) / 1000000 + {int(seconds * 1000)} )); "
        '( while :; do echo "$SCHEDD_ATTEMPT_ID $(date +%s.%N)" >> "$f"; '
        "[ $(( $(date +%s%N) / 1000000 )) -ge $end ] && break; sleep 0.05; done ) & wait"
    )


def marked_dag(
    dag_id: str, edges: dict[str, list[str]], marks: Path, seconds: float, **task: object
) -> dict[str, Any]:
    """A DAG spec (as a dict for YAML) of marked tasks with the given upstream edges."""
    return {
        "dag_id": dag_id,
        "tasks": [
            {
                "task_id": tid,
                "upstream": ups,
                "shell": {"command": marked_command(seconds)},
                "env": {"MARKS": str(marks)},
                **task,
            }
            for tid, ups in edges.items()
        ],
    }


Span = tuple[float, float, int]


def read_marks(marks: Path) -> dict[tuple[str, str], dict[str, Span]]:
    """(run id, task id) -> attempt id -> (first mark, last mark, number of marks)."""
    result: dict[tuple[str, str], dict[str, Span]] = defaultdict(dict)
    for path in marks.iterdir():
        run_id, _, task_id = path.name.rpartition(".")
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 2:
                continue  # a line cut short by a kill
            attempt, at = parts[0], float(parts[1])
            first, last, n = result[(run_id, task_id)].get(attempt, (at, at, 0))
            result[(run_id, task_id)][attempt] = (min(first, at), max(last, at), n + 1)
    return result


def check_no_overlap(marks: Path) -> None:
    for key, attempts in read_marks(marks).items():
        spans = sorted(attempts.values())
        for earlier, later in itertools.pairwise(spans):
            assert earlier[1] < later[0], f"{key}: attempts overlap: {earlier} and {later}"


def check_upstream_order(marks: Path, edges: dict[str, list[str]]) -> None:
    by_run: dict[str, dict[str, dict[str, Span]]] = defaultdict(dict)
    for (run_id, task_id), attempts in read_marks(marks).items():
        by_run[run_id][task_id] = attempts
    for run_id, tasks in by_run.items():
        for task_id, ups in edges.items():
            if task_id not in tasks:
                continue
            first = min(span[0] for span in tasks[task_id].values())
            for up in ups:
                assert up in tasks, f"{run_id}: {task_id} ran but its upstream {up} never did"
                last = max(span[1] for span in tasks[up].values())
                assert last < first, f"{run_id}: {task_id} started at {first} before {up} ended at {last}"


def attempts_per_task(marks: Path) -> dict[tuple[str, str], int]:
    return {key: len(attempts) for key, attempts in read_marks(marks).items()}


def check_passes_in_token_order(cluster: Cluster) -> None:
    rows = cluster.fetch("SELECT token FROM scheduler_passes ORDER BY committed_at, id")
    tokens = [int(r["token"]) for r in rows]
    for i, (earlier, later) in enumerate(itertools.pairwise(tokens)):
        assert earlier <= later, f"pass {i + 1} of term {later} committed after a pass of term {earlier}"


class FenceWatch:
    """Samples the fence token in a thread while a test runs; the token must never go down."""

    def __init__(self, cluster: Cluster, interval: float = 0.05) -> None:
        self._cluster = cluster
        self._interval = interval
        self._stop = threading.Event()
        self.samples: list[int] = []
        self._thread = threading.Thread(target=self._run, name="fence-watch", daemon=True)

    def __enter__(self) -> FenceWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for earlier, later in itertools.pairwise(self.samples):
            assert earlier <= later, f"the fence token went down from {earlier} to {later}"

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # the database may be down during the fault
                self.samples.append(self._cluster.fence()[0])
            self._stop.wait(self._interval)


def wait_settled(cluster: Cluster, dag_id: str, run_ids: list[str], timeout: float) -> None:
    """Wait (bounded) until every run finished; then every run succeeded and no task instance of
    the DAG is left queued or running."""
    deadline = time.monotonic() + timeout
    while True:
        rows = cluster.fetch(
            "SELECT run_id, state FROM dag_runs WHERE dag_id = $1 AND run_id = ANY($2::text[])",
            dag_id,
            run_ids,
        )
        states = {r["run_id"]: r["state"] for r in rows}
        assert set(states) == set(run_ids), f"runs acknowledged but not stored: {set(run_ids) - set(states)}"
        if all(s in ("success", "failed") for s in states.values()):
            break
        if time.monotonic() > deadline:
            tasks = cluster.fetch(
                "SELECT r.run_id, ti.task_id, ti.state, ti.try_number, ti.worker_id FROM task_instances ti "
                "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.dag_id = $1 AND ti.state NOT IN ('success') "
                "ORDER BY r.run_id, ti.task_id",
                dag_id,
            )
            raise AssertionError(f"runs did not settle in {timeout:g}s: {states}; unfinished tasks: {tasks}")
        time.sleep(0.1)
    assert all(s == "success" for s in states.values()), states
    left = cluster.fetchval(
        "SELECT count(*) FROM task_instances WHERE dag_id = $1 AND state IN ('queued', 'running')", dag_id
    )
    assert left == 0, f"{left} task instances left queued or running"


def check_all(cluster: Cluster, marks: Path, edges: dict[str, list[str]]) -> None:
    check_no_overlap(marks)
    check_upstream_order(marks, edges)
    check_passes_in_token_order(cluster)
