"""Printing results as Rich tables (the default) or JSON (``-o json``)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from rich.console import Console
from rich.table import Table

from schedd.v1 import api_pb2
from schedd.v1 import resources_pb2 as pb

console = Console()
err_console = Console(stderr=True)

_STATE_STYLE = {
    "success": "green",
    "failed": "red",
    "upstream_failed": "red",
    "running": "cyan",
    "queued": "yellow",
    "skipped": "magenta",
    "up_for_retry": "yellow",
    "succeeded": "green",
    "paused": "yellow",
    "cancelled": "magenta",
}


def as_json(message: Message | list[Message]) -> str:
    if isinstance(message, list):
        return json.dumps([_dict(m) for m in message], indent=2)
    return json.dumps(_dict(message), indent=2)


def _dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def state_name(enum_type: Any, value: int, prefix: str) -> str:
    return str(enum_type.Name(value)).removeprefix(prefix).lower()


def styled(state: str) -> str:
    style = _STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def dags_table(dags: list[pb.Dag]) -> Table:
    table = Table("DAG", "PAUSED", "TASKS", "SCHEDULE", "VERSION")
    for d in dags:
        table.add_row(
            d.dag_id,
            "yes" if d.paused else "no",
            str(len(d.spec.tasks)),
            d.spec.schedule
            or (
                f"every {d.spec.schedule_interval.ToTimedelta()}"
                if d.spec.HasField("schedule_interval")
                else "-"
            ),
            d.latest_version,
        )
    return table


def run_table(run: pb.DagRun) -> Table:
    state = state_name(pb.RunState, run.state, "RUN_STATE_")
    kind = state_name(pb.RunType, run.run_type, "RUN_TYPE_")
    details = [f"{kind} run, logical date {_time(run.logical_date)}"]
    if run.HasField("data_interval"):
        details.append(f"data interval {_interval(run.data_interval)}")
    if run.backfill:
        details.append(f"made by {run.backfill}")
    if run.error:
        details.append(f"error: {run.error}")
    table = Table(
        "TASK",
        "STATE",
        "TRY",
        "WORKER",
        "STARTED",
        "ENDED",
        title=f"{run.name}  {styled(state)}  (version {run.dag_version})",
        caption="\n".join(details),
    )
    for t in run.task_instances:
        table.add_row(
            t.task_id,
            styled(state_name(pb.TaskState, t.state, "TASK_STATE_")),
            str(t.try_number),
            t.worker_id or "-",
            _time(t.start_time) if t.HasField("start_time") else "-",
            _time(t.end_time) if t.HasField("end_time") else "-",
        )
    return table


def runs_table(runs: list[pb.DagRun]) -> Table:
    table = Table("RUN", "STATE", "TYPE", "LOGICAL DATE")
    for r in runs:
        table.add_row(
            r.name,
            styled(state_name(pb.RunState, r.state, "RUN_STATE_")),
            state_name(pb.RunType, r.run_type, "RUN_TYPE_"),
            _time(r.logical_date),
        )
    return table


def _time(ts: Any) -> str:
    return str(ts.ToDatetime().isoformat(timespec="milliseconds"))


def utc(ts: Any) -> str:
    return str(ts.ToDatetime().isoformat(timespec="seconds")) + "Z"


def styled_code(code: str) -> str:
    """A gRPC status code name, red unless OK."""
    return code if code == "OK" else f"[red]{code}[/red]"


def _interval(interval: pb.DataInterval) -> str:
    return f"{utc(interval.start)} .. {utc(interval.end)}"


def intervals_table(intervals: list[pb.DataInterval]) -> Table:
    table = Table("LOGICAL DATE (UTC)", "DATA INTERVAL END (UTC)")
    for i in intervals:
        table.add_row(utc(i.start), utc(i.end))
    return table


def backfill_summary(b: pb.Backfill) -> str:
    p = b.progress
    done = p.succeeded + p.failed + p.skipped
    state = state_name(pb.BackfillState, b.state, "BACKFILL_STATE_")
    return (
        f"{b.name or 'dry run'} of dag {b.dag_id}: {state}, {done}/{p.total} done "
        f"({p.succeeded} succeeded, {p.failed} failed, {p.skipped} skipped), {p.running} running, "
        f"{p.pending} pending" + (f"; {b.error}" if b.error else "")
    )


def backfill_table(b: pb.Backfill) -> Table:
    strategy = state_name(pb.BackfillStrategy, b.strategy, "BACKFILL_STRATEGY_")
    reprocess = state_name(pb.ReprocessBehavior, b.reprocess, "REPROCESS_BEHAVIOR_")
    table = Table(
        "LOGICAL DATE (UTC)",
        "DATA INTERVAL END (UTC)",
        title=backfill_summary(b),
        caption=(
            f"{utc(b.start_date)} .. {utc(b.end_date)}, {strategy}, max_active_runs {b.max_active_runs}, "
            f"chunk_size {b.chunk_size}, {'backward' if b.backward else 'forward'}, {reprocess}"
        ),
    )
    for i in b.intervals:
        table.add_row(utc(i.start), utc(i.end))
    return table


def backfills_table(backfills: list[pb.Backfill]) -> Table:
    table = Table("BACKFILL", "DAG", "STATE", "STRATEGY", "DONE", "RUNNING", "FAILED", "RANGE (UTC)")
    for b in backfills:
        p = b.progress
        table.add_row(
            b.name,
            b.dag_id,
            styled(state_name(pb.BackfillState, b.state, "BACKFILL_STATE_")),
            state_name(pb.BackfillStrategy, b.strategy, "BACKFILL_STRATEGY_"),
            f"{p.succeeded + p.failed + p.skipped}/{p.total}",
            str(p.running),
            str(p.failed),
            f"{utc(b.start_date)} .. {utc(b.end_date)}",
        )
    return table


def leader_table(status: api_pb2.Leader) -> Table:
    title = (
        f"leader [bold]{status.leader.identity}[/bold], token {status.token}, fence at {status.fence_token}"
        if status.elected
        else f"[yellow]no leader right now[/yellow] (fence at {status.fence_token})"
    )
    table = Table("REPLICA", "ROLE", "SINCE", "METRICS", title=title)
    replicas = ([(status.leader, "leader")] if status.elected else []) + [
        (s, "standby") for s in status.standbys
    ]
    for replica, role in replicas:
        since = _time(replica.since) if replica.HasField("since") else "-"
        table.add_row(replica.identity, role, since, replica.address or "-")
    return table


def workers_table(workers: list[api_pb2.Worker]) -> Table:
    table = Table("WORKER", "STATE", "QUEUES", "LOAD", "REGISTRY", "LAST SEEN")
    for w in workers:
        table.add_row(
            w.worker_id,
            w.state,
            ",".join(w.queues),
            f"{w.running}/{w.capacity}",
            w.registry or "-",
            _time(w.last_seen_time),
        )
    return table


def pools_table(pools: list[api_pb2.Pool]) -> Table:
    table = Table("POOL", "SLOTS", "USED", "WAITING", "BACKFILL SHARE", "DESCRIPTION")
    for p in pools:
        table.add_row(
            p.pool, str(p.slots), str(p.used), str(p.waiting), f"{p.backfill_share:.0%}", p.description
        )
    return table
