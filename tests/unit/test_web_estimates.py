"""The web UI's estimate of an unfinished run's end and critical path (``schedd_web.estimates``), on
made-up runs: medians of earlier successful runs, the chain of remaining tasks that decides the end,
tasks that never ran counted as 0 s and named, and no estimate for a finished run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedd.v1 import resources_pb2 as pb
from schedd_web import estimates

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
T0 = int(NOW.timestamp())


def _spec(edges: dict[str, list[str]]) -> pb.DagSpec:
    return pb.DagSpec(
        dag_id="d",
        tasks=[
            pb.TaskSpec(task_id=t, upstream=ups, shell=pb.ShellCommand(command="true"))
            for t, ups in edges.items()
        ],
    )


def _run(
    run_id: str, tasks: dict[str, tuple[str, int | None, int | None]], state: str = "RUNNING"
) -> pb.DagRun:
    """A run whose tasks are ``task -> (state, start, end)``, times in seconds after T0 (None: unset)."""
    run = pb.DagRun(
        name=f"dags/d/runs/{run_id}", dag_id="d", run_id=run_id, state=pb.RunState.Value(f"RUN_STATE_{state}")
    )
    for task_id, (task_state, start, end) in tasks.items():
        ti = run.task_instances.add(
            task_id=task_id, state=pb.TaskState.Value(f"TASK_STATE_{task_state}"), map_index=-1
        )
        if start is not None:
            ti.start_time.FromSeconds(T0 + start)
        if end is not None:
            ti.end_time.FromSeconds(T0 + end)
    return run


def _done(run_id: str, durations: dict[str, int]) -> pb.DagRun:
    return _run(run_id, {t: ("SUCCESS", -1000, -1000 + d) for t, d in durations.items()}, state="SUCCESS")


DIAMOND = {"a": [], "b": ["a"], "d": ["a"], "c": ["b", "d"]}


def test_the_end_follows_the_longest_chain_of_remaining_tasks() -> None:
    """b runs (started 5 s ago, median 10 s), d waits for nothing left (median 3 s), c after both
    (median 20 s): c starts when b is expected to end, in 5 s, and ends 25 s from now; b then c is
    the critical path, d is not on it."""
    history = [
        _done("h1", {"a": 4, "b": 10, "c": 20, "d": 3}),
        _done("h2", {"a": 4, "b": 10, "c": 20, "d": 3}),
    ]
    run = _run(
        "r",
        {
            "a": ("SUCCESS", -30, -5),
            "b": ("RUNNING", -5, None),
            "d": ("QUEUED", None, None),
            "c": ("NONE", None, None),
        },
    )
    found = estimates.estimate(_spec(DIAMOND), run, history, NOW)
    assert found is not None
    assert found.end == NOW + timedelta(seconds=25)
    assert found.critical == ("b", "c")
    assert found.starts["c"] == NOW + timedelta(seconds=5) and found.ends["d"] == NOW + timedelta(seconds=3)
    assert set(found.starts) == {"b", "c", "d"}  # a ended: not remaining
    assert found.runs == 2 and found.never_ran == ()
    assert found.basis().startswith("median of the last 2 successful runs;")


def test_durations_are_medians_of_successful_runs_only() -> None:
    history = [
        _done("h1", {"a": 1}),
        _done("h2", {"a": 2}),
        _done("h3", {"a": 100}),  # an outlier moves a mean, not the median
        _run("failed", {"a": ("FAILED", -100, -1)}, state="FAILED"),
    ]
    run = _run("r", {"a": ("QUEUED", None, None)}, state="QUEUED")
    found = estimates.estimate(_spec({"a": []}), run, history, NOW)
    assert found is not None and found.end == NOW + timedelta(seconds=2) and found.runs == 3
    assert estimates.medians(history) == {"a": 2}


def test_only_the_newest_history_runs_count() -> None:
    history = [_done(f"h{i}", {"a": 10}) for i in range(estimates.HISTORY_RUNS)] + [_done("old", {"a": 1000})]
    run = _run("r", {"a": ("NONE", None, None)})
    found = estimates.estimate(_spec({"a": []}), run, history, NOW)
    assert (
        found is not None
        and found.runs == estimates.HISTORY_RUNS
        and found.end == NOW + timedelta(seconds=10)
    )


def test_tasks_that_never_ran_count_as_zero_and_are_named() -> None:
    run = _run("r", {"a": ("RUNNING", -1, None), "new": ("NONE", None, None)})
    found = estimates.estimate(_spec({"a": [], "new": ["a"]}), run, [_done("h", {"a": 60})], NOW)
    assert found is not None
    assert found.never_ran == ("new",) and found.end == NOW + timedelta(seconds=59)
    assert found.critical == ("a", "new")
    assert "1 task never ran before: counted as 0 s" in found.basis()
    alone = estimates.estimate(_spec({"a": []}), _run("r", {"a": ("NONE", None, None)}), [], NOW)
    assert alone is not None and alone.basis().startswith("no earlier successful run")


def test_a_task_past_its_median_is_expected_to_end_now_not_in_the_past() -> None:
    run = _run("r", {"a": ("RUNNING", -600, None), "b": ("NONE", None, None)})
    found = estimates.estimate(_spec({"a": [], "b": ["a"]}), run, [_done("h", {"a": 60, "b": 0})], NOW)
    assert found is not None and found.end == NOW
    assert found.critical == ("a", "b")  # b still waits for a, due now


def test_a_finished_run_has_no_estimate() -> None:
    run = _run("r", {"a": ("SUCCESS", -10, -5)}, state="SUCCESS")
    assert estimates.estimate(_spec({"a": []}), run, [], NOW) is None


def test_a_mapped_task_takes_from_its_first_start_to_its_last_end() -> None:
    run = _done("h", {})
    for index, (start, end) in enumerate(((0, 5), (2, 30))):
        ti = run.task_instances.add(task_id="m", state=pb.TASK_STATE_SUCCESS, map_index=index)
        ti.start_time.FromSeconds(T0 + start)
        ti.end_time.FromSeconds(T0 + end)
    assert estimates.task_durations([run]) == {"m": [30.0]}
