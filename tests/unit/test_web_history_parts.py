"""The web UI's history views without a browser: the calendar's weeks of days, the version diff's
stable spec text and file diffs, and the timeline's segment per try with estimated spans."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta

import pytest

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import calendar_days, estimates, shapes, version_diff

TODAY = date(2026, 3, 4)  # a Wednesday


def _run(run_id: str, day: date, state: str, hour: int = 12) -> pb.DagRun:
    run = pb.DagRun(
        name=f"dags/d/runs/{run_id}", dag_id="d", run_id=run_id, state=pb.RunState.Value(f"RUN_STATE_{state}")
    )
    run.logical_date.FromDatetime(datetime(day.year, day.month, day.day, hour, tzinfo=UTC))
    return run


def test_the_calendar_counts_runs_by_utc_day_in_whole_weeks() -> None:
    runs = [
        _run("a", TODAY, "SUCCESS"),
        _run("b", TODAY, "FAILED", hour=23),
        _run("c", TODAY, "SUCCESS", hour=0),
        _run("d", TODAY - timedelta(days=8), "RUNNING"),
        _run("old", TODAY - timedelta(days=400), "FAILED"),  # outside the window: not counted
    ]
    weeks = calendar_days.weeks_of(runs, TODAY, 2)
    assert len(weeks) == 2 and all(len(w) == 7 for w in weeks)
    assert weeks[0][0].day == date(2026, 2, 23) and weeks[0][0].day.weekday() == 0
    assert weeks[-1][-1].day == date(2026, 3, 8)
    days = {d.day: d for w in weeks for d in w}
    today = days[TODAY]
    assert today.count == 3 and today.states == (("failed", 1), ("success", 2)) and today.state == "failed"
    assert "3 runs (1 failed, 2 success)" in today.title
    assert days[TODAY - timedelta(days=8)].state == "running"
    assert days[TODAY + timedelta(days=1)].future and not today.future
    assert sum(d.count for d in days.values()) == 4


@pytest.mark.parametrize("raw", ["0", "54", "x", "-1", "1.5"])
def test_bad_weeks_and_days_name_their_field(raw: str) -> None:
    with pytest.raises(ValueError, match=r"^weeks:"):
        calendar_days.read_weeks(raw)
    with pytest.raises(ValueError, match=r"^day:"):
        calendar_days.read_day(raw)
    assert (
        calendar_days.read_weeks("") == calendar_days.DEFAULT_WEEKS and calendar_days.read_weeks("53") == 53
    )
    assert calendar_days.read_day("2026-03-04") == TODAY


def test_the_spec_text_is_stable_and_the_diff_shows_what_changed() -> None:
    old = pb.DagSpec(
        dag_id="d", tags=["b", "a"], tasks=[pb.TaskSpec(task_id="t", shell=pb.ShellCommand(command="echo 1"))]
    )
    new = pb.DagSpec()
    new.CopyFrom(old)
    new.tasks[0].shell.command = "echo <b>2</b>"
    text = version_diff.spec_text(old)
    assert text == version_diff.spec_text(pb.DagSpec.FromString(old.SerializeToString()))
    assert text.index('"dagId"') < text.index('"tags"') < text.index('"tasks"')  # keys sorted
    lines, cut = version_diff.unified(text, version_diff.spec_text(new), "a/spec.json", "b/spec.json")
    changes = [(line.kind, " ".join(line.text.split())) for line in lines if line.kind in ("add", "del")]
    assert changes == [("del", '- "command": "echo 1"'), ("add", '+ "command": "echo <b>2</b>"')] and not cut
    assert version_diff.unified(text, text, "a", "b") == ((), False)


def _file(path: str, content: bytes, truncated: bool = False) -> api_pb2.BundleFile:
    return api_pb2.BundleFile(
        path=path,
        size_bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        content=content,
        content_truncated=truncated,
    )


def test_file_diffs_skip_equal_files_and_say_why_there_is_no_diff() -> None:
    old = [
        _file("same.py", b"x = 1\n"),
        _file("changed.py", b"a\nb\n"),
        _file("gone.py", b"bye\n"),
        _file("blob", b"\xff\x00"),
    ]
    new = [
        _file("same.py", b"x = 1\n"),
        _file("changed.py", b"a\nc\n"),
        _file("new.py", b"hi\n"),
        _file("blob", b"\xfe"),
    ]
    diffs, same = version_diff.file_diffs(old, new, "a/1", "b/2")
    assert same == 1
    assert [(d.path, d.change) for d in diffs] == [
        ("blob", "changed"),
        ("changed.py", "changed"),
        ("gone.py", "removed"),
        ("new.py", "added"),
    ]
    blob, changed, gone, added = diffs
    assert blob.lines == () and "not UTF-8" in blob.note
    assert [line.text for line in changed.lines if line.kind in ("add", "del")] == ["-b", "+c"]
    assert changed.lines[0].text == "--- a/1/changed.py"
    assert [line.text for line in gone.lines if line.kind == "del"] == ["-bye"]
    assert [line.text for line in added.lines if line.kind == "add"] == ["+hi"]
    cut, _ = version_diff.file_diffs(
        [_file("f", b"a" * 10)], [_file("f", b"b" * 10, truncated=True)], "a", "b"
    )
    assert "only the start" in cut[0].note


def test_the_timeline_has_a_segment_per_try_and_the_estimated_rest() -> None:
    now = datetime.fromtimestamp(200, UTC)
    run = pb.DagRun(name="dags/d/runs/r", dag_id="d", run_id="r", state=pb.RUN_STATE_RUNNING)
    flaky = run.task_instances.add(task_id="flaky", state=pb.TASK_STATE_SUCCESS, map_index=-1, try_number=2)
    flaky.start_time.FromSeconds(130)
    flaky.end_time.FromSeconds(150)
    run.task_instances.add(task_id="after", state=pb.TASK_STATE_NONE, map_index=-1)
    attempts = []
    for number, state, start, end in (
        (1, pb.TASK_STATE_FAILED, 100, 120),
        (2, pb.TASK_STATE_SUCCESS, 130, 150),
    ):
        attempt = api_pb2.TaskAttempt(task_id="flaky", map_index=-1, try_number=number, state=state)
        attempt.start_time.FromSeconds(start)
        attempt.end_time.FromSeconds(end)
        attempts.append(attempt)
    later = estimates.Estimate(
        end=datetime.fromtimestamp(300, UTC),
        critical=("after",),
        starts={"after": now},
        ends={"after": datetime.fromtimestamp(300, UTC)},
        runs=3,
        never_ran=(),
    )
    bars, height = shapes.gantt(run, now=now, attempts=attempts, estimate=later)
    assert [b.label for b in bars] == ["flaky", "after"] and height > 0
    flaky_bar, after_bar = bars
    assert [(s.try_number, s.state, s.text) for s in flaky_bar.segments] == [
        (1, "failed", "1✗"),
        (2, "success", "2✓"),
    ]
    first, second = flaky_bar.segments
    assert first.x == shapes.LABEL_WIDTH and first.x + first.width < second.x  # the gap between tries
    assert [(s.try_number, s.state) for s in after_bar.segments] == [(0, "estimated")]
    assert after_bar.critical and not flaky_bar.critical
    assert after_bar.segments[0].x + after_bar.segments[0].width == shapes.LABEL_WIDTH + shapes.CHART_WIDTH
    plain, _ = shapes.gantt(run, now=now)  # without attempts: the task instance's own times
    assert [(s.try_number, s.state) for s in plain[0].segments] == [(2, "success")]
