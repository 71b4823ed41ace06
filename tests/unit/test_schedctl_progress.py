"""schedctl's progress line reads a run's task instances, or its summary's counts per state."""

from __future__ import annotations

from schedctl.output import progress_line
from schedd.v1 import resources_pb2 as pb


def test_a_summary_and_the_full_run_read_the_same() -> None:
    states = [pb.TASK_STATE_SUCCESS] * 3 + [pb.TASK_STATE_RUNNING, pb.TASK_STATE_UPSTREAM_FAILED]
    full = pb.DagRun(
        name="dags/d/runs/r",
        state=pb.RUN_STATE_RUNNING,
        task_instances=[pb.TaskInstance(task_id=f"t{i}", state=s) for i, s in enumerate(states)],
    )
    summary = pb.DagRun(
        name="dags/d/runs/r",
        state=pb.RUN_STATE_RUNNING,
        task_state_counts=[
            pb.TaskStateCount(state=pb.TASK_STATE_SUCCESS, count=3),
            pb.TaskStateCount(state=pb.TASK_STATE_RUNNING, count=1),
            pb.TaskStateCount(state=pb.TASK_STATE_UPSTREAM_FAILED, count=1),
        ],
    )
    expected = "dags/d/runs/r: running, 4 of 5 task instances done (1 running, 1 failed)"
    assert progress_line(full) == progress_line(summary) == expected
