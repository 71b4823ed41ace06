"""The benchmark's report: every figure against its target (met / not met), as a readable table and
as a PNG of the chain's latency distribution and the throughput by worker count."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TTL = 2.0


@dataclass(frozen=True)
class Target:
    what: str
    #: Reads the figure from the results (None when it was not measured).
    figure: Callable[[dict[str, Any]], float | None]
    unit: str
    #: ``("<=", 2.0)``, ``(">=", 2000.0)``.
    bound: tuple[str, float]
    #: Where the figure's spread is (a dict with ``min`` and ``max``), for a figure that is the median
    #: of several measurements; shown beside it.
    spread: tuple[str, ...] = ()


def _get(*path: str) -> Callable[[dict[str, Any]], float | None]:
    def read(results: dict[str, Any]) -> float | None:
        value: Any = results
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return float(value)

    return read


def _ratio(loaded: tuple[str, ...], empty: tuple[str, ...]) -> Callable[[dict[str, Any]], float | None]:
    def read(results: dict[str, Any]) -> float | None:
        a, b = _get(*loaded)(results), _get(*empty)(results)
        return None if a is None or not b else a / b

    return read


def _worst(*readers: Callable[[dict[str, Any]], float | None]) -> Callable[[dict[str, Any]], float | None]:
    def read(results: dict[str, Any]) -> float | None:
        values = [v for v in (r(results) for r in readers) if v is not None]
        return max(values) if values else None

    return read


GROWTH = ("growth_1000_dags", "growth_10000_dags_100k_finished_100k_queued")

TARGETS = [
    Target(
        "chained no-op tasks, end of one to start of the next, median, against the link's floor (x floor)",
        _ratio(("chain", "gap_ms_median"), ("floors", "chain_link_floor_ms")),
        "x",
        ("<=", 4.0),
    ),
    Target(
        "the chain median against Celery + Redis's, measured side by side (x Celery, median of the rounds)",
        _get("celery", "chain_x_celery", "median"),
        "x",
        ("<=", 1.0),
        spread=("celery", "chain_x_celery"),
    ),
    Target(
        "the chain p99 against its median",
        _ratio(("chain", "gap_ms_p99"), ("chain", "gap_ms_median")),
        "x",
        ("<=", 4.0),
    ),
    Target(
        "fan-out of 1,000 no-op Python tasks, 4 workers",
        _get("fan_out_4_workers", "tasks_per_s_median"),
        "tasks/s",
        (">=", 2000.0),
    ),
    Target(
        "the same against Celery + Redis's fan-out, measured side by side (x Celery, median of the rounds)",
        _get("celery", "fan_out_x_celery", "median"),
        "x",
        (">=", 3.0),
        spread=("celery", "fan_out_x_celery"),
    ),
    Target(
        "fan-out of 1,000 no-op shell tasks, 4 workers",
        _get("fan_out_shell_4_workers", "tasks_per_s_median"),
        "tasks/s",
        (">=", 1000.0),
    ),
    Target(
        "chain median while 1,000 runs are created at once (x quiet)",
        _get("bursts", "runs_burst", "chain_median_x_quiet"),
        "x",
        ("<=", 2.0),
    ),
    Target(
        "the same, only the links that began while the burst's tasks ran (x quiet)",
        _get("bursts", "runs_burst", "chain_during_median_x_quiet"),
        "x",
        ("<=", 2.0),
    ),
    Target(
        "the same, the burst's tasks in a pool of 8 slots of their own (x quiet)",
        _get("bursts", "runs_burst_own_pool", "chain_during_median_x_quiet"),
        "x",
        ("<=", 2.0),
    ),
    Target(
        "chain median while 100k task instances are queued elsewhere (x quiet)",
        _get("bursts", "backlog_burst", "chain_median_x_quiet"),
        "x",
        ("<=", 2.0),
    ),
    Target(
        "chain median with 10,000 other DAGs, 100k finished and 100k queued (x empty)",
        _worst(*(_ratio((g, "gap_ms_median"), ("growth_empty", "gap_ms_median")) for g in GROWTH)),
        "x",
        ("<=", 1.2),
    ),
    Target(
        "claim (queued to claimed) median under the same load (x empty)",
        _worst(
            *(
                _ratio((g, "queued_to_claimed_ms_median"), ("growth_empty", "queued_to_claimed_ms_median"))
                for g in GROWTH
            )
        ),
        "x",
        ("<=", 1.2),
    ),
    Target(
        "trigger to first task under the same load (x empty)",
        _worst(
            *(
                _ratio(
                    (g, "trigger_to_first_task_ms_median"),
                    ("growth_empty", "trigger_to_first_task_ms_median"),
                )
                for g in GROWTH
            )
        ),
        "x",
        ("<=", 1.2),
    ),
    Target(
        "leader's memory (PSS) under the same load (x empty)",
        _worst(*(_ratio((g, "leader_pss_mb"), ("growth_empty", "leader_pss_mb")) for g in GROWTH)),
        "x",
        ("<=", 1.2),
    ),
    Target(
        "leader kill -9 to the next committed pass", _get("failover_kill9_seconds"), "s", ("<=", TTL + 0.5)
    ),
    Target(
        "leader frozen holding the fence lock to the next committed pass",
        _get("failover_frozen_seconds"),
        "s",
        ("<=", TTL + 0.5),
    ),
    Target(
        "leader SIGTERM hand-over to the next committed pass",
        _get("failover_sigterm_seconds"),
        "s",
        ("<=", 0.1),
    ),
    Target(
        "whole stack (api, scheduler, registry, 2 workers, web UI), PSS",
        _get("footprint", "services_pss_mb"),
        "MB",
        ("<=", 300.0),
    ),
    Target(
        "the same stack idle, CPU", _get("footprint", "services_idle_cpu_percent"), "% of a core", ("<", 0.5)
    ),
    Target("the web UI service, PSS", _get("footprint", "each", "web", "pss_mb"), "MB", ("<", 60.0)),
    Target(
        "the web UI service idle, CPU",
        _get("footprint", "each", "web", "idle_cpu_percent"),
        "% of a core",
        ("<", 0.5),
    ),
]


def verdicts(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for target in TARGETS:
        value = target.figure(results)
        op, bound = target.bound
        met = (
            None
            if value is None
            else (value <= bound if op == "<=" else value >= bound if op == ">=" else value < bound)
        )
        rows.append(
            {
                "what": target.what,
                "measured": value,
                "spread": _spread(results, target.spread),
                "unit": target.unit,
                "target": f"{op} {bound:g}",
                "met": met,
            }
        )
    return rows


def _spread(results: dict[str, Any], path: tuple[str, ...]) -> tuple[float, float] | None:
    low, high = _get(*path, "min")(results), _get(*path, "max")(results)
    return None if low is None or high is None else (low, high)


def table(rows: list[dict[str, Any]], floor_ms: float | None) -> str:
    lines = ["| figure | measured | target | |", "|---|---|---|---|"]
    for r in rows:
        value = "-" if r["measured"] is None else f"{r['measured']:,.2f} {r['unit']}"
        if r.get("spread") is not None:
            value += " ({:,.2f}-{:,.2f})".format(*r["spread"])
        verdict = {True: "met", False: "not met", None: "not measured"}[r["met"]]
        lines.append(f"| {r['what']} | {value} | {r['target']} {r['unit']} | {verdict} |")
    if floor_ms:
        lines.append(
            "\nchain link floor on this machine (3 commits, 2 notifications, a stream round trip): "
            f"{floor_ms:.2f} ms"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> bool:
    """Write the PNG; False (and nothing written) without matplotlib."""
    try:
        import matplotlib  # type: ignore[import-not-found, unused-ignore]  # the bench extra

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return False
    figure, (latency, throughput) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in (("chain", "empty"), (GROWTH[-1], "10k DAGs, 100k finished, 100k queued")):
        gaps = sorted(results.get(key, {}).get("gaps_ms", []))
        if gaps:
            latency.plot(gaps, [(i + 1) / len(gaps) for i in range(len(gaps))], label=label)
    floor = results.get("floors", {}).get("chain_link_floor_ms")
    if floor:
        latency.axvline(floor, linestyle=":", color="grey", label=f"floor {floor:.2f} ms")
        latency.axvline(4 * floor, linestyle="--", color="red", label="target: 4x the floor")
    latency.set(
        xlabel="end of a task to start of the next (ms)",
        ylabel="fraction of links",
        title="chain latency, CDF",
    )
    latency.legend(fontsize=8)
    workers = [w for w in (1, 2, 4) if f"fan_out_{w}_workers" in results]
    throughput.bar(
        [str(w) for w in workers], [results[f"fan_out_{w}_workers"]["tasks_per_s_median"] for w in workers]
    )
    throughput.axhline(2000, linestyle="--", color="red", label="target (4 workers)")
    throughput.set(xlabel="workers (8 slots each)", ylabel="tasks/s", title="1,000 no-op Python tasks")
    throughput.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
