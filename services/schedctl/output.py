"""Printing results: Rich tables (``-o table``, ``-o wide`` with more columns), JSON and YAML with
the same lower-case state names as the tables and every field (zero values included), integral
numbers of conf, params and results as integers (``schedctl.documents``), or only resource names
(``-o name``).

Tables are as wide as their content when standard output is not a terminal (nothing is cut when
piped); colours appear only on a terminal and never with ``NO_COLOR`` set (Rich's own rules).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml
from google.protobuf import json_format
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from schedctl.documents import plain_numbers
from schedctl.instance_rows import LeftOut, Summary, key_of, table_rows
from schedd.v1 import api_pb2, resources_pb2 as pb

#: Wide enough that no column is cut when the output goes to a file or a pipe.
_UNBOUNDED = 100_000
console = Console(width=None if sys.stdout.isatty() else _UNBOUNDED)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else _UNBOUNDED)

_STATE_STYLE = {
    "success": "green",
    "failed": "red",
    "upstream_failed": "red",
    "running": "cyan",
    "queued": "yellow",
    "skipped": "magenta",
    "up_for_retry": "yellow",
    "up_for_reschedule": "yellow",
    "succeeded": "green",
    "paused": "yellow",
    "cancelled": "magenta",
}


def as_json(message: Message | list[Message]) -> str:
    return json.dumps(as_data(message), indent=2)


def as_yaml(message: Message | list[Message]) -> str:
    return yaml.safe_dump(as_data(message), sort_keys=False, allow_unicode=True)


def as_names(message: Message | list[Message]) -> str:
    """The resource name of each item (``dags/etl/runs/r1``), one per line."""
    items = message if isinstance(message, list) else [message]
    return "\n".join(str(getattr(m, "name", "")) for m in items if getattr(m, "name", ""))


def as_data(message: Message | list[Message]) -> Any:
    if isinstance(message, list):
        return [as_data(m) for m in message]
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _lower_enums(message.DESCRIPTOR, data)
    plain_numbers(message.DESCRIPTOR, data)
    return data


def _lower_enums(descriptor: Any, data: dict[str, Any]) -> None:
    """Enum values as the tables show them: ``TASK_STATE_SUCCESS`` -> ``success``."""
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        if field.enum_type is not None:
            data[field.name] = (
                [_enum(field.enum_type, v) for v in value]
                if field.is_repeated
                else _enum(field.enum_type, value)
            )
        elif field.message_type is not None and not field.message_type.full_name.startswith(
            "google.protobuf."
        ):
            if field.message_type.GetOptions().map_entry:
                continue
            for item in value if field.is_repeated else [value]:
                if isinstance(item, dict):
                    _lower_enums(field.message_type, item)


def _enum(enum_type: EnumDescriptor, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    prefix = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(enum_type.name)).upper() + "_"
    return value.removeprefix(prefix).lower()


def state_name(enum_type: Any, value: int, prefix: str) -> str:
    return str(enum_type.Name(value)).removeprefix(prefix).lower()


def run_state(run: pb.DagRun) -> str:
    """The run's state as a user says it: ``cancelled`` for a run that failed because it was cancelled."""
    if run.cancelled and run.state == pb.RUN_STATE_FAILED:
        return "cancelled"
    return state_name(pb.RunState, run.state, "RUN_STATE_")


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


def run_table(run: pb.DagRun, *, wide: bool = False) -> Table:
    """A run and its task instances, each named by its key (``process[3]`` for a mapped instance); a
    mapped task with many instances is summarised unless ``wide`` (``schedctl.instance_rows``)."""
    state = run_state(run)
    kind = state_name(pb.RunType, run.run_type, "RUN_TYPE_")
    details = [f"{kind} run, logical date {_time(run.logical_date)}"]
    if run.HasField("data_interval"):
        details.append(f"data interval {_interval(run.data_interval)}")
    if run.backfill:
        details.append(f"made by {run.backfill}")
    if run.error:
        details.append(f"error: {run.error}")
    if run.HasField("deadline_missed_time"):
        details.append(
            f"missed its deadline {_time(run.deadline_time)} (recorded {_time(run.deadline_missed_time)})"
        )
    elif run.HasField("deadline_time"):
        details.append(f"deadline {_time(run.deadline_time)}")
    other = sorted(
        {key_of(t) for t in run.task_instances if t.dag_version and t.dag_version != run.dag_version}
    )
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        details.append(f"ran an earlier version: {shown} (-o wide shows each task's version)")
    columns = ["TASK", "STATE", "TRY", "WORKER", "STARTED", "ENDED"]
    if wide:
        columns += ["POOL", "QUEUE", "PRIORITY", "EXIT", "VERSION"]
    columns.append("ERROR")
    table = Table(
        *columns,
        title=f"{run.name}  {styled(state)}  (version {run.dag_version})",
        caption="\n".join(details),
    )
    blank = ["-"] * (len(columns) - 2)
    summarised = False
    for item in table_rows(run.task_instances, wide=wide):
        if isinstance(item, Summary):
            summarised = True
            counts = ", ".join(f"{n} {styled(s)}" for s, n in item.by_state)
            table.add_row(escape(item.task_id), f"{item.total} instances: {counts}", *blank)
        elif isinstance(item, LeftOut):
            more = f"... {item.count} more not succeeded (-o wide lists every instance)"
            table.add_row(escape(f"{item.task_id}[...]"), more, *blank)
        else:
            table.add_row(*_instance_row(item, wide))
    if summarised:
        details.append("mapped tasks with many instances: only those not succeeded; -o wide lists all")
        table.caption = "\n".join(details)
    return table


def _instance_row(t: pb.TaskInstance, wide: bool) -> list[str]:
    row = [
        escape(key_of(t)),
        styled(state_name(pb.TaskState, t.state, "TASK_STATE_")),
        str(t.try_number),
        t.worker_id or "-",
        _time(t.start_time) if t.HasField("start_time") else "-",
        _time(t.end_time) if t.HasField("end_time") else "-",
    ]
    if wide:
        row += [
            t.pool,
            t.queue,
            str(t.priority_weight),
            str(t.exit_code) if t.HasField("end_time") else "-",
            t.dag_version or "-",
        ]
    row.append(t.error or "-")
    return row


def progress_line(run: pb.DagRun) -> str:
    """``dags/d/runs/r: running, 3 of 5 task instances done (1 running, 0 failed)``; each instance of a
    mapped task counts as one."""
    counts: dict[str, int] = {}
    for t in run.task_instances:
        name = state_name(pb.TaskState, t.state, "TASK_STATE_")
        counts[name] = counts.get(name, 0) + 1
    for c in run.task_state_counts:  # a summary (RUN_VIEW_SUMMARY) has counts instead
        name = state_name(pb.TaskState, c.state, "TASK_STATE_")
        counts[name] = counts.get(name, 0) + c.count
    done = sum(counts.get(s, 0) for s in ("success", "failed", "skipped", "upstream_failed"))
    state = run_state(run)
    failed = counts.get("failed", 0) + counts.get("upstream_failed", 0)
    return (
        f"{run.name}: {state}, {done} of {sum(counts.values())} task instances done "
        f"({counts.get('running', 0)} running, {failed} failed)"
    )


def runs_table(runs: list[pb.DagRun], *, wide: bool = False) -> Table:
    columns = ["RUN", "STATE", "TYPE", "LOGICAL DATE"]
    if wide:
        columns += ["DATA INTERVAL", "STARTED", "ENDED", "BACKFILL", "ERROR"]
    table = Table(*columns)
    for r in runs:
        row = [
            r.name,
            styled(run_state(r)),
            state_name(pb.RunType, r.run_type, "RUN_TYPE_"),
            _time(r.logical_date),
        ]
        if wide:
            row += [
                _interval(r.data_interval) if r.HasField("data_interval") else "-",
                _time(r.start_time) if r.HasField("start_time") else "-",
                _time(r.end_time) if r.HasField("end_time") else "-",
                r.backfill or "-",
                r.error or "-",
            ]
        table.add_row(*row)
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
    """Next runs: when each is made, its logical date and data interval."""
    table = Table("RUN AT (UTC)", "LOGICAL DATE (UTC)", "DATA INTERVAL (UTC)")
    for i in intervals:
        logical = i.logical_date if i.HasField("logical_date") else i.start
        run_at = i.run_after if i.HasField("run_after") else i.end
        table.add_row(utc(run_at), utc(logical), f"{utc(i.start)} .. {utc(i.end)}")
    return table


def backfill_summary(b: pb.Backfill) -> str:
    p = b.progress
    done = p.succeeded + p.failed + p.skipped
    state = state_name(pb.BackfillState, b.state, "BACKFILL_STATE_")
    return (
        f"{b.name} of dag {b.dag_id}: {state}, {done}/{p.total} done "
        f"({p.succeeded} succeeded, {p.failed} failed, {p.skipped} skipped), {p.running} running, "
        f"{p.pending} pending" + (f"; {b.error}" if b.error else "")
    )


def dry_run_table(b: pb.Backfill) -> Table:
    """The intervals a backfill would go through (a dry run: nothing is stored or run)."""
    count = len(b.intervals)
    strategy = state_name(pb.BackfillStrategy, b.strategy, "BACKFILL_STRATEGY_")
    reprocess = state_name(pb.ReprocessBehavior, b.reprocess, "REPROCESS_BEHAVIOR_")
    table = Table(
        "LOGICAL DATE (UTC)",
        "DATA INTERVAL END (UTC)",
        title=(
            f"dry run, nothing stored: a backfill of dag {b.dag_id} would go through {count} "
            f"interval{'' if count == 1 else 's'}, making a run for each unless --reprocess skips it"
        ),
        caption=(
            f"{utc(b.start_date)} .. {utc(b.end_date)}, {strategy}, max_active_runs {b.max_active_runs}, "
            f"chunk_size {b.chunk_size}, {'backward' if b.backward else 'forward'}, {reprocess}"
        ),
    )
    for i in b.intervals:
        table.add_row(utc(i.logical_date if i.HasField("logical_date") else i.start), utc(i.end))
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
