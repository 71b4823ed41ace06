"""When an unfinished run is likely to end, and which of its remaining tasks decide that.

From the run's DAG version (its tasks and their upstream tasks), the run as it stands and earlier
successful runs of the DAG: each task is expected to take the **median** of its durations in those
runs (a task's duration: from the first start to the last end of its instances, so a mapped task
counts as a whole); a task never seen succeeding there counts as 0 s and is named. Walking the tasks
in dependency order, a task that ended keeps its end; a running one ends at its start plus its
median, or now if that has passed; one that has not started starts at now or when its last upstream
task is expected to end, whichever is later. The run's estimated end is the latest of these ends,
and the **critical path** is the chain of remaining tasks that leads to it, each started by the one
before it.

Guaranteed: a pure function of its inputs (no clock read, no I/O); every remaining task of the
version has an estimated start and end; the critical path lists remaining tasks only, each an
upstream task of the next. Not guaranteed: that the run ends then. Pools, worker slots, queueing,
retries still to come, sensors and branches that skip tasks are not modelled, and a task that ran
on another version of the DAG counts with the same id.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from schedd.v1 import resources_pb2 as pb
from schedd_web.grid import topological

#: Earlier successful runs the medians come from, at most.
HISTORY_RUNS = 10
_FINAL = frozenset(
    {
        pb.TASK_STATE_SUCCESS,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_SKIPPED,
        pb.TASK_STATE_UPSTREAM_FAILED,
        pb.TASK_STATE_REMOVED,
    }
)
_UNFINISHED_RUN = frozenset({pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING})


@dataclass(frozen=True)
class Estimate:
    """An unfinished run's estimated end and critical path (see the module)."""

    end: datetime
    #: remaining tasks on the critical path, first to last
    critical: tuple[str, ...]
    #: estimated start and end of each remaining task
    starts: dict[str, datetime]
    ends: dict[str, datetime]
    #: how many earlier successful runs the medians come from
    runs: int
    #: remaining tasks without a duration in those runs (counted as 0 s)
    never_ran: tuple[str, ...]

    def basis(self) -> str:
        """How the estimate was made, in words."""
        if not self.runs:
            said = "no earlier successful run: every task counted as 0 s"
        else:
            said = f"median of the last {self.runs} successful run{'' if self.runs == 1 else 's'}"
            if self.never_ran:
                n = len(self.never_ran)
                said += f"; {n} task{'' if n == 1 else 's'} never ran before: counted as 0 s"
        return said + "; pools, slots and retries not counted"


def _seconds(ts: object) -> float | None:
    """Epoch seconds of a set Timestamp, None for an unset one."""
    seconds, nanos = getattr(ts, "seconds", 0), getattr(ts, "nanos", 0)
    return seconds + nanos / 1e9 if seconds or nanos else None


def _by_task(run: pb.DagRun) -> dict[str, list[pb.TaskInstance]]:
    found: dict[str, list[pb.TaskInstance]] = {}
    for ti in run.task_instances:
        found.setdefault(ti.task_id, []).append(ti)
    return found


def task_durations(runs: Iterable[pb.DagRun]) -> dict[str, list[float]]:
    """Seconds each task took in ``runs``: from its instances' first start to their last end, for
    tasks whose instances all succeeded with both times set."""
    durations: dict[str, list[float]] = {}
    for run in runs:
        for task_id, tis in _by_task(run).items():
            starts = [_seconds(t.start_time) for t in tis]
            ends = [_seconds(t.end_time) for t in tis]
            if any(t.state != pb.TASK_STATE_SUCCESS for t in tis) or None in starts or None in ends:
                continue
            first = min(s for s in starts if s is not None)
            last = max(e for e in ends if e is not None)
            durations.setdefault(task_id, []).append(max(last - first, 0.0))
    return durations


def medians(runs: Iterable[pb.DagRun]) -> dict[str, float]:
    """The median of each task's durations in ``runs`` (see :func:`task_durations`)."""
    return {task_id: statistics.median(d) for task_id, d in task_durations(runs).items()}


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def estimate(spec: pb.DagSpec, run: pb.DagRun, history: list[pb.DagRun], now: datetime) -> Estimate | None:
    """The estimate for ``run`` (of the version whose spec is ``spec``) from the successful runs
    ``history`` (other runs, newest first; only the first :data:`HISTORY_RUNS` count); None for a
    run that is not queued or running."""
    if run.state not in _UNFINISHED_RUN:
        return None
    earlier = [r for r in history if r.name != run.name and r.state == pb.RUN_STATE_SUCCESS][:HISTORY_RUNS]
    typical = medians(earlier)
    upstream = {t.task_id: list(t.upstream) for t in spec.tasks}
    instances = _by_task(run)
    current = now.timestamp()
    end_of: dict[str, float] = {}
    start_of: dict[str, float] = {}
    driver: dict[str, str] = {}
    remaining: list[str] = []
    for task_id in topological(spec):
        tis = instances.get(task_id, [])
        if tis and all(t.state in _FINAL for t in tis):
            end_of[task_id] = max((_seconds(t.end_time) or current for t in tis), default=current)
            continue
        remaining.append(task_id)
        took = typical.get(task_id, 0.0)
        started = [s for s in (_seconds(t.start_time) for t in tis) if s is not None]
        if started and any(t.state == pb.TASK_STATE_RUNNING for t in tis):
            start_of[task_id] = min(started)
            end_of[task_id] = max(start_of[task_id] + took, current)
            continue
        ready, by = current, ""
        for parent in upstream.get(task_id, []):  # a remaining parent holds it up even if due now
            end = end_of.get(parent, current)
            if end > ready or (end == ready and parent in start_of):
                ready, by = end, parent
        start_of[task_id], end_of[task_id] = ready, ready + took
        if by:
            driver[task_id] = by
    return Estimate(
        end=_when(max([current, *end_of.values()])),
        critical=_critical_path(remaining, end_of, driver),
        starts={t: _when(start_of[t]) for t in remaining},
        ends={t: _when(end_of[t]) for t in remaining},
        runs=len(earlier),
        never_ran=tuple(t for t in remaining if t not in typical),
    )


def _critical_path(remaining: list[str], end_of: dict[str, float], driver: dict[str, str]) -> tuple[str, ...]:
    """The chain of remaining tasks ending at the latest one, each started by the one before it."""
    if not remaining:
        return ()
    # Of tasks ending together, the last in dependency order: the path then runs to the DAG's end.
    last = max(reversed(remaining), key=lambda t: end_of[t])
    chain = [last]
    while chain[-1] in driver and driver[chain[-1]] in remaining:
        chain.append(driver[chain[-1]])
    return tuple(reversed(chain))
