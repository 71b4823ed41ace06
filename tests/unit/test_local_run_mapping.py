"""``schedctl dags test`` of DAGs with mapped tasks: expansion, per-instance runs, reduces, a mapped
task with no elements (skipped) and one whose list is not a list (failed without running).

The tasks run for real (a worker's executor and a warm Python child), as in ``test_schedctl_authoring``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import app
from schedctl.local_run import LocalRun, TaskEvent, run_locally
from schedd.v1 import resources_pb2 as pb
from schedd_core.states import RunState, TaskState
from schedd_sdk import DAG, task

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # where workers run, so Python tasks import by their module paths


@task
def numbers(count: int) -> list[int]:
    return list(range(1, count + 1))


@task
def not_a_list() -> dict[str, int]:
    return {"a": 1}


@task
def square(x: int) -> int | None:
    """Stores nothing for 2, so a reduce sees None in its place."""
    return None if x == 2 else x * x


@task
def add(x: int, y: int, *, offset: int) -> int:
    return x + y + offset


@task
def collect(values: list[Any]) -> list[Any]:
    print(f"collected {values}")
    return values


async def run(spec: pb.DagSpec) -> tuple[LocalRun, list[TaskEvent]]:
    events: list[TaskEvent] = []
    done = await run_locally(
        spec, conf={}, logical_date=datetime(2025, 1, 2, tzinfo=UTC), on_event=events.append
    )
    return done, events


async def test_instances_run_with_their_elements_and_a_reduce_gets_their_results_in_order() -> None:
    with DAG("mapped") as d:
        squares = square.expand(x=numbers(3))
        collect(squares)
        sums = add.partial(offset=100).expand(x=[1, 2], y=[10, 20])
        collect(sums)
    done, events = await run(d.to_spec())
    assert done.state is RunState.SUCCESS
    assert (
        done.results["square[0]"] == 1 and "square[1]" not in done.results and done.results["square[2]"] == 9
    )
    assert done.results["collect"] == [1, None, 9]
    assert [done.results[f"add[{i}]"] for i in range(4)] == [
        111,
        121,
        112,
        122,
    ]  # the last list varies fastest
    assert done.results["collect__1"] == [111, 121, 112, 122]
    assert "square" not in done.tasks and "add" not in done.tasks  # the placeholders were replaced
    assert {k: s for k, s in done.tasks.items() if k.startswith("square")} == {
        f"square[{i}]": TaskState.SUCCESS for i in range(3)
    }
    started = [e.task_id for e in events if e.state is TaskState.RUNNING and not e.output]
    assert (
        started.index("numbers")
        < started.index("square[0]")
        < started.index("square[2]")
        < started.index("collect")
    )
    assert any(e.task_id == "collect" and e.output == b"collected [1, None, 9]\n" for e in events)


async def test_no_elements_skip_a_mapped_task_and_a_list_that_is_not_one_fails_it_unrun() -> None:
    with DAG("edge_cases") as d:
        collect.override(task_id="after_empty")(square.override(task_id="empty").expand(x=numbers(0)))
        collect.override(task_id="after_bad")(square.override(task_id="bad").expand(x=not_a_list()))
    done, events = await run(d.to_spec())
    assert done.state is RunState.FAILED
    assert done.tasks["empty"] is TaskState.SKIPPED and done.tasks["after_empty"] is TaskState.SKIPPED
    assert done.tasks["bad"] is TaskState.FAILED and done.tasks["after_bad"] is TaskState.UPSTREAM_FAILED
    (failed,) = [e for e in events if e.task_id == "bad"]
    assert failed.state is TaskState.FAILED and failed.error == "cannot expand x=: its value is not a list"
    assert not any(e.task_id.startswith(("empty[", "bad[")) for e in events)  # no instance ran


def test_dags_test_runs_the_mapping_example_printing_each_instance() -> None:
    run = CliRunner().invoke(app, ["dags", "test", str(REPO / "examples" / "mapping.py")])
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    for i, (path, rows) in enumerate(
        [("eu/orders.csv", 120), ("us/orders.csv", 80), ("apac/orders.csv", 45)]
    ):
        assert f"[count_rows[{i}]] | {path}: {rows} rows (instance {i})" in lines
        assert f"[count_rows[{i}]] success" in lines
    assert "[summarise] | 3 files, 245 rows" in lines
    assert "[notify[0]] | email: 245 rows loaded" in lines and "[notify[1]] | chat: 245 rows loaded" in lines
    assert not any(line.startswith(("[count_rows] ", "[notify] ")) for line in lines)
    assert lines[-1].endswith(": success")
