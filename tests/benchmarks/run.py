"""``make bench``: schedd's performance figures, measured on real processes, next to the machine's own
limits and against the targets.

Starts a durable PostgreSQL and etcd (fsync on: every state change is durable), then clusters of the
real services. Groups (``--only`` picks some):

- ``floors``: what PostgreSQL, gRPC and etcd cost on this machine with nothing of schedd in the way
  (``tests.benchmarks.floors``), and the chain-link floor they imply;
- ``celery``: the peer, Celery + Redis with two prefork processes, and a schedd cluster (4 workers of 8
  slots) side by side: ``--peer-rounds`` rounds, each measuring both the same way one right after the
  other (a chain and a 1,000-task fan-out; ``tests.benchmarks.peers``), so the targets written as
  ratios to Celery are checked on measurements taken together; skipped, saying why, without Redis
  or Celery;
- ``throughput``: 1,000-task fan-outs of no-op Python tasks with 1, 2 and 4 workers (8 slots each),
  and of no-op shell tasks with 4 workers (tasks/s from the run's creation to its end, and the CPU
  milliseconds per task of the scheduler, the registry, the workers and PostgreSQL);
- ``latency``: a 100-link chain (end of one task to the start of the next: median, p90, p99), a second
  chain right after it, and a one-task DAG (trigger to first task, trigger to success);
- ``growth``: the chain (median of three), the claim time (queued to claimed), trigger-to-first-task and
  the leader's memory with nothing else
  in the store, with 1,000 other DAGs, and with 10,000 other DAGs, 100k finished task instances and
  100k task instances queued in a queue and pool no worker serves;
- ``failover``: kill -9 and SIGTERM of the leader, and a leader frozen while it holds the fence lock,
  to the new term's first committed pass (the default lease: TTL 2 s);
- ``footprint``: PSS and idle CPU of each service, of PostgreSQL and of etcd;
- ``backfill``: a 365-interval backfill and the lateness of a DAG scheduled every second meanwhile;
- ``sensors``: 1,000 reschedule-mode sensors waiting on 4 workers with 8 slots each: the slots they
  hold while waiting, a one-task DAG's latency beside them, and the time from their condition to the
  end of their run;
- ``timers``: how late retries (1 s retry delay) and reschedule-mode sensor pokes (1 s poke interval)
  start after their due time (median, p99, max) in a manual run, a scheduled run and five backfill
  runs going on at once;
- ``mapping``: a task mapped over a 1,000-element list on 4 workers with 8 slots each: the expansion
  (the list's end to its instances queued), task instances per second created and run, and the time
  to the end of the reduce over their results;
- ``flood``: 300,000 task instances triggered at once (30 runs of 10,000 tasks no worker serves) and a
  one-task DAG triggered once a second meanwhile: how long creating them takes and how late the
  one-task runs start (``tests.benchmarks.flood``);
- ``pypool``: the warm Python pool alone (``tests.benchmarks.pypool``): no-op tasks per second with 2
  children, and how long ending an overrunning task (on SIGTERM, and on SIGKILL after the kill grace)
  and closing the pool take;
- ``worker``: one worker service (8 slots) alone against a stand-in registry that only hands out
  no-op assignments and acknowledges (``tests.benchmarks.worker_alone``): tasks/s and its CPU per
  task with freed slots filled at once and 20 ms later (the pace of a fan-out's worker);
- ``profile``: py-spy samples of the scheduler, the registry and a worker during a fan-out;
- ``statements``: PostgreSQL's statements per task of a fan-out and of a chain and their execution
  time, and the statements that take most of it (``tests.benchmarks.statements``; loads
  ``pg_stat_statements`` into the run's PostgreSQL, so run it on its own);
- ``bursts``: a 50-link chain quiet, while 1,000 runs of a 5-task DAG are created at once (and their
  tasks/s), and right after 100 runs of a 1,000-task DAG (100k task instances) are created in a
  queue no worker serves (``tests.benchmarks.bursts``);
- ``assets``: from an asset event recorded through the api, and from a message on a watched Redis
  stream, to the start of the run it triggers (100 each, one run per event; ``tests.benchmarks.assets``).
- ``deadlines``: the delay from a run's missed deadline to its miss being recorded and to its webhook
  notification arriving, over ``--deadline-runs`` runs (``tests.benchmarks.deadlines``).

Writes ``bench-results.json`` (every figure), ``bench-results.md`` (the targets table, met / not met)
and ``bench-results.png`` (chain latency CDF, throughput by worker count). Nothing is asserted.

With ``--baseline REF`` (``make bench BASELINE=REF``) it measures REF and the working tree
interleaved instead, and reports each figure as a ratio with its spread (``tests.benchmarks.ab``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedd_coord.access import ROOT_USER
from schedd_devstack.etcd_access import CREDENTIALS_ENV
from schedd_devstack.services import Cluster
from schedd_devstack.stack import DevStack
from tests.benchmarks import ab
from tests.benchmarks.assets import measure_asset_latency, watcher_env
from tests.benchmarks.backfill import measure_backfill
from tests.benchmarks.bursts import measure_bursts
from tests.benchmarks.cluster_figures import measure_failover, measure_footprint
from tests.benchmarks.common import register, schedctl
from tests.benchmarks.deadlines import measure_deadline_notifications
from tests.benchmarks.flood import measure_flood
from tests.benchmarks.floors import measure_floors
from tests.benchmarks.mapping import measure_mapped_task
from tests.benchmarks.peers import measure_peers
from tests.benchmarks.process_stats import pss_kib
from tests.benchmarks.profile import profile
from tests.benchmarks.pypool import measure_pypool
from tests.benchmarks.report import plot, table, verdicts
from tests.benchmarks.sensors import measure_waiting_sensors
from tests.benchmarks.statements import SETTINGS as STATEMENT_SETTINGS, measure_statements, missing_library
from tests.benchmarks.timers import measure_timer_lateness
from tests.benchmarks.worker_alone import measure_worker_alone
from tests.benchmarks.workloads import (
    add_load,
    chain_spec,
    measure_chain,
    measure_fan_out,
    measure_single_task,
)

GROUPS = (
    "floors",
    "celery",
    "throughput",
    "latency",
    "failover",
    "footprint",
    "backfill",
    "sensors",
    "timers",
    "mapping",
    "flood",
    "pypool",
    "worker",
    "profile",
    "statements",
    "bursts",
    "growth",
    "assets",
    "deadlines",
)


def section(name: str, fn: Callable[[], Any], results: dict[str, Any]) -> None:
    print(f"-- {name} ...", flush=True)
    started = time.monotonic()
    value = fn()
    results[name] = value
    shown = {k: v for k, v in value.items() if not isinstance(v, list)} if isinstance(value, dict) else value
    print(f"   {shown}  ({time.monotonic() - started:.1f} s)", flush=True)


class Bench:
    def __init__(self, stack: DevStack, workdir: Path, args: argparse.Namespace) -> None:
        env = stack.env()
        self.stack = stack
        self.url = env["SCHEDD_DATABASE_URL"]
        self.etcd = env["SCHEDD_ETCD_ENDPOINTS"]
        self.workdir = workdir
        self.args = args
        self.results: dict[str, Any] = {"machine": machine()}

    def cluster(self, name: str, **kwargs: Any) -> Cluster:
        """Services with their default settings (the lease: TTL 2 s, a keep-alive every 0.5 s)."""
        return Cluster(self.url, self.etcd, self.workdir / name, **kwargs)

    def floors(self) -> None:
        section("floors", lambda: measure_floors(self.url, self.etcd), self.results)

    def celery(self) -> None:
        args = self.args
        with self.cluster("peers", workers=4, worker_capacity=8) as c:
            section(
                "celery",
                lambda: measure_peers(
                    c, self.workdir, links=args.links, n=args.fan_out, rounds=args.peer_rounds
                ),
                self.results,
            )

    def throughput(self) -> None:
        n = self.args.fan_out
        others = {"postgres": self.stack.postgres.pid or 0}
        for workers in (1, 2, 4):
            with self.cluster(f"fanout{workers}", workers=workers, worker_capacity=8) as c:
                section(
                    f"fan_out_{workers}_workers",
                    lambda: measure_fan_out(c, self.workdir, n, runs=3, label="tp", others=others),
                    self.results,
                )
                if workers == 4:
                    section(
                        "fan_out_shell_4_workers",
                        lambda: measure_fan_out(
                            c, self.workdir, n, runs=1, shell=True, label="tp", others=others
                        ),
                        self.results,
                    )

    def latency(self) -> None:
        links = self.args.links
        with self.cluster("latency", workers=4, worker_capacity=8) as c:
            section("chain", lambda: measure_chain(c, self.workdir, links, "plain"), self.results)
            section("chain_again", lambda: measure_chain(c, self.workdir, links, "again"), self.results)
            section(
                "single_task",
                lambda: measure_single_task(c, self.workdir, runs=20, label="plain"),
                self.results,
            )

    def bursts(self) -> None:
        with self.cluster("bursts", workers=4, worker_capacity=8) as c:
            section("bursts", lambda: measure_bursts(c, self.workdir, links=50), self.results)

    def growth(self) -> None:
        """Last, since the load it adds stays in the store."""
        steps = (
            ("growth_empty", 0, 0, 0),
            ("growth_1000_dags", 1000, 0, 0),
            ("growth_10000_dags_100k_finished_100k_queued", 10_000, 100_000, 100_000),
        )
        with self.cluster("growth", workers=4, worker_capacity=8) as c:
            for name, dags, finished, queued in steps:
                asyncio.run(add_load(self.url, dags=dags, finished=finished, queued=queued))
                section(name, functools.partial(self._growth_step, c, name), self.results)

    def _growth_step(self, cluster: Cluster, label: str) -> dict[str, Any]:
        chains = [measure_chain(cluster, self.workdir, self.args.links, f"{label}-{i}") for i in range(3)]
        chain = {
            "repetitions": len(chains),
            "gap_ms_median": statistics.median(c["gap_ms_median"] for c in chains),
            "gap_ms_p99": statistics.median(c["gap_ms_p99"] for c in chains),
            "queued_to_claimed_ms_median": statistics.median(
                c["queued_to_claimed_ms_median"] for c in chains
            ),
            "gaps_ms": [g for c in chains for g in c["gaps_ms"]],
        }
        single = measure_single_task(cluster, self.workdir, runs=20, label=label)
        leader = cluster.leader()
        memory = {"leader_pss_mb": pss_kib([leader.pid]) / 1024} if leader is not None and leader.pid else {}
        return chain | single | memory

    def failover(self) -> None:
        faults = self.workdir / "faults"
        with self.cluster(
            "failover", schedulers=2, workers=2, scheduler_env={"SCHEDD_FAULTS": str(faults)}
        ) as c:
            for how, name in (
                ("kill", "failover_kill9_seconds"),
                ("term", "failover_sigterm_seconds"),
                ("frozen", "failover_frozen_seconds"),
            ):
                section(name, functools.partial(measure_failover, c, how, self.workdir, faults), self.results)

    def footprint(self) -> None:
        with self.cluster("footprint", workers=2, web=True) as c:
            register(c, chain_spec(3), self.workdir)
            schedctl(c, "runs", "trigger", "chain", "--run-id", "warm", "--wait")
            time.sleep(5.0)  # let start-up and the warm-up run settle before measuring "idle"
            others = {"postgres": self.stack.postgres.pid or 0, "etcd": self.stack.etcd.pid or 0}
            section("footprint", lambda: measure_footprint(c, 20.0, others), self.results)

    def backfill(self) -> None:
        with self.cluster("backfill", workers=4, worker_capacity=8) as c:
            section(
                "backfill_parallel",
                lambda: measure_backfill(c, self.workdir, self.args.backfill_intervals, max_active_runs=16),
                self.results,
            )

    def deadlines(self) -> None:
        with self.cluster("deadlines", workers=1) as c:
            section(
                "deadline_notifications",
                lambda: measure_deadline_notifications(c, self.workdir, self.args.deadline_runs),
                self.results,
            )

    def sensors(self) -> None:
        with self.cluster("sensors", workers=4, worker_capacity=8) as c:
            section(
                "sensors_waiting",
                lambda: measure_waiting_sensors(c, self.workdir, self.args.sensors, poke_interval="10s"),
                self.results,
            )

    def assets(self) -> None:
        stream = f"schedd-bench-{os.getpid()}"
        with self.cluster("assets", workers=2, scheduler_env=watcher_env(stream)) as c:
            section(
                "assets", lambda: measure_asset_latency(c, self.workdir, stream, events=100), self.results
            )

    def timers(self) -> None:
        with self.cluster("timers", workers=4, worker_capacity=8) as c:
            section(
                "timer_lateness",
                lambda: measure_timer_lateness(c, self.workdir, self.args.timer_tasks, intervals=5, pokes=5),
                self.results,
            )

    def mapping(self) -> None:
        with self.cluster("mapping", workers=4, worker_capacity=8) as c:
            section(
                "mapped_task",
                lambda: measure_mapped_task(c, self.workdir, self.args.map_elements, runs=3),
                self.results,
            )

    def flood(self) -> None:
        with self.cluster("flood", workers=1) as c:
            section("flood", lambda: measure_flood(c, self.workdir, runs=30, tasks=10_000), self.results)

    def pypool(self) -> None:
        section("pypool", measure_pypool, self.results)

    def worker(self) -> None:
        section("worker_alone", measure_worker_alone, self.results)

    def profile(self) -> None:
        with self.cluster("profile", workers=4, worker_capacity=8) as c:
            n = self.args.fan_out
            section(
                "profile_fan_out",
                lambda: profile(c, lambda: measure_fan_out(c, self.workdir, n, runs=2, label="profile")),
                self.results,
            )

    def statements(self) -> None:
        with self.cluster("statements", workers=4, worker_capacity=8) as c:
            args = self.args
            section(
                "statements",
                lambda: measure_statements(c, self.workdir, fan_out=args.fan_out, links=args.links),
                self.results,
            )


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError, StopIteration):
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def write_report(results: dict[str, Any], out: Path) -> None:
    out.write_text(json.dumps(results, indent=2, default=str))
    rows = verdicts(results)
    markdown = table(rows, results.get("floors", {}).get("chain_link_floor_ms"))
    out.with_suffix(".md").write_text(markdown + "\n")
    print(markdown)
    png = out.with_suffix(".png")
    print(
        f"written to {out}, {out.with_suffix('.md')}"
        + (f", {png}" if plot(results, png) else " (no matplotlib: no PNG)")
    )


def _use_etcd_root(stack: DevStack) -> None:
    """etcd has authentication on: this process (its own etcd clients, the fail-over measurements)
    acts as root, and the clusters it starts give each service its own etcd user."""
    credentials = stack.etcd.credentials
    if credentials is None:
        return
    os.environ.update(credentials.service_env(ROOT_USER))
    os.environ[CREDENTIALS_ENV] = str(credentials.directory)


def _passed_on(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """The sizes given on the command line that differ from their defaults, for each run of an
    interleaved comparison (a baseline older than an option runs with its own default)."""
    sizes = (
        "fan_out",
        "links",
        "peer_rounds",
        "backfill_intervals",
        "sensors",
        "map_elements",
        "timer_tasks",
        "deadline_runs",
    )
    return [
        f"--{name.replace('_', '-')}={getattr(args, name)}"
        for name in sizes
        if getattr(args, name) != parser.get_default(name)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fan-out", type=int, default=1000)
    parser.add_argument("--links", type=int, default=100)
    parser.add_argument(
        "--peer-rounds", type=int, default=5, help="celery: rounds of schedd and Celery side by side"
    )
    parser.add_argument("--backfill-intervals", type=int, default=365)
    parser.add_argument("--sensors", type=int, default=1000)
    parser.add_argument("--deadline-runs", type=int, default=20, help="runs that miss a deadline (deadlines)")
    parser.add_argument("--map-elements", type=int, default=1000)
    parser.add_argument("--timer-tasks", type=int, default=20, help="retries and sensors per run (timers)")
    parser.add_argument("--only", default="", help="comma-separated groups: " + ", ".join(GROUPS))
    parser.add_argument("--out", default="bench-results.json")
    parser.add_argument(
        "--baseline",
        default="",
        help="a git ref: measure it and the working tree interleaved (tests.benchmarks.ab)",
    )
    parser.add_argument("--pairs", type=int, default=3, help="with --baseline: baseline/candidate pairs")
    args = parser.parse_args()
    if args.peer_rounds < 1:
        parser.error("--peer-rounds must be at least 1")
    if args.baseline:
        ab.interleaved(
            args.baseline,
            args.only or "latency,throughput",
            args.pairs,
            Path(args.out if args.out != "bench-results.json" else "bench-ab.json"),
            _passed_on(args, parser),
        )
        return
    groups = set(args.only.split(",")) if args.only else set(GROUPS)
    unknown = groups - set(GROUPS)
    if unknown:
        parser.error(f"unknown groups: {', '.join(sorted(unknown))}")
    workdir = Path(tempfile.mkdtemp(prefix="schedd-bench-"))
    started = time.monotonic()
    settings = STATEMENT_SETTINGS if "statements" in groups and not missing_library() else None
    with DevStack(durable=True, postgres_settings=settings) as stack:
        _use_etcd_root(stack)
        bench = Bench(stack, workdir, args)
        for name in GROUPS:  # in this order
            if name in groups:
                getattr(bench, name)()
    bench.results["bench_seconds"] = time.monotonic() - started
    write_report(bench.results, Path(args.out))


if __name__ == "__main__":
    main()
