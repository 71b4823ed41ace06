"""What the run page's timeline and the grid's estimate read from the api besides the run: every
attempt of a run (``ListTaskAttempts``) and the DAG's earlier successful runs with the run's DAG
version, from which :mod:`schedd_web.estimates` makes the estimate.

Guaranteed: every call is made with the viewer's own token; an api that refuses or lacks
``ListTaskAttempts`` leaves the chart at one segment per task instance instead of failing the page.
Not guaranteed: that the history is the same from one page load to the next (runs end meanwhile).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web import estimates
from schedd_web.api import ApiError
from schedd_web.base import API
from schedd_web.live import FINAL_RUN_STATES


@dataclass(frozen=True)
class History:
    """The run's DAG version spec and the DAG's newest successful runs (with task instances)."""

    spec: pb.DagSpec
    runs: list[pb.DagRun]

    def estimate(self, run: pb.DagRun, now: datetime | None = None) -> estimates.Estimate | None:
        return estimates.estimate(self.spec, run, self.runs, now or datetime.now(UTC))


async def attempts_of(request: web.Request, run: pb.DagRun, token: str) -> list[api_pb2.TaskAttempt]:
    """Every attempt of ``run``; empty when the api does not answer with them."""
    api = request.app[API]
    try:
        found = await api.call(
            api.runs.ListTaskAttempts, api_pb2.ListTaskAttemptsRequest(parent=run.name), token
        )
    except ApiError:
        return []
    return list(found.attempts)


async def history_of(request: web.Request, run: pb.DagRun, token: str) -> History | None:
    """The history an estimate of ``run`` needs; None for a finished run (it needs none)."""
    if run.state in FINAL_RUN_STATES:
        return None
    api = request.app[API]
    version_name = f"dags/{run.dag_id}/versions/{run.dag_version}"
    listing = api_pb2.ListRunsRequest(
        parent=f"dags/{run.dag_id}", page_size=estimates.HISTORY_RUNS + 1, states=[pb.RUN_STATE_SUCCESS]
    )
    version, listed = await asyncio.gather(
        api.call(api.dags.GetDagVersion, api_pb2.GetDagVersionRequest(name=version_name), token),
        api.call(api.runs.ListRuns, listing, token),
    )
    names = [r.name for r in listed.runs if r.name != run.name][: estimates.HISTORY_RUNS]
    reads = [api.call(api.runs.GetRun, api_pb2.GetRunRequest(name=name), token) for name in names]
    return History(version.spec, list(await asyncio.gather(*reads)))


def estimate_words(estimate: estimates.Estimate | None) -> str:
    """``estimated end 2026-03-02 14:32:05Z (median of ...)``; empty without an estimate."""
    if estimate is None:
        return ""
    return f"estimated end {estimate.end.strftime('%Y-%m-%d %H:%M:%SZ')} ({estimate.basis()})"


@dataclass(frozen=True)
class RunEstimate:
    """The estimate of one run, as the grid shows it."""

    run: pb.DagRun
    estimate: estimates.Estimate
    words: str


async def newest_estimate(request: web.Request, runs: list[pb.DagRun], token: str) -> RunEstimate | None:
    """The estimate of the newest unfinished run of ``runs`` (given newest first); None without one."""
    run = next((r for r in runs if r.state not in FINAL_RUN_STATES), None)
    history = await history_of(request, run, token) if run is not None else None
    found = history.estimate(run) if history is not None and run is not None else None
    if run is None or found is None:
        return None
    return RunEstimate(run, found, estimate_words(found))
