"""schedd against its peer, interleaved: the ratios the targets are written as, each from measurements
taken side by side.

This machine's timings drift by 20-50 % (at times 2x) within minutes, so a ratio of two figures
measured minutes apart says as much about the drift as about the two systems. Here a schedd cluster
and a Celery + Redis worker (``tests.benchmarks.celery_peer``) run at once, each idle while the other
is measured, and every round measures both, one right after the other (each once the machine is
quiet again: :func:`~tests.benchmarks.process_stats.wait_until_quiet`): a chain (``links`` links,
end of one no-op task to the start of the next) and a fan-out (``n`` no-op Python tasks). Rounds
alternate which system goes first. Each round gives a ratio, schedd over Celery (the chain's median
link, the fan-out's tasks/s); the result keeps their median and spread and each side's own figures.

The schedd cluster is the caller's: the targets name 4 workers of 8 slots for the fan-out.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster
from tests.benchmarks.celery_peer import PROCESSES, running_peer, unavailable
from tests.benchmarks.common import percentile
from tests.benchmarks.process_stats import wait_until_quiet
from tests.benchmarks.workloads import measure_chain, measure_fan_out


def measure_peers(cluster: Cluster, workdir: Path, *, links: int, n: int, rounds: int) -> dict[str, Any]:
    """The chain and fan-out of schedd (on ``cluster``) and of Celery, ``rounds`` times interleaved,
    and their ratios; ``{"skipped": reason}`` without Redis or Celery."""
    reason = unavailable()
    if reason is not None:
        return {"skipped": reason}
    measure_chain(cluster, workdir, 10, "peer-warm")
    measure_fan_out(cluster, workdir, n, runs=1, label="peer-warm")  # the workers' Python processes start
    schedd_chains: list[dict[str, Any]] = []
    celery_chains: list[list[float]] = []
    schedd_rates: list[float] = []
    celery_rates: list[float] = []
    with running_peer() as peer:
        peer.fan_out(n)
        for i in range(rounds):
            order = (True, False) if i % 2 == 0 else (False, True)  # schedd's side first, or Celery's
            for schedd in order:
                wait_until_quiet()
                if schedd:
                    schedd_chains.append(measure_chain(cluster, workdir, links, f"peer-{i}"))
                else:
                    celery_chains.append(peer.chain(links))
            for schedd in order:
                wait_until_quiet()
                if schedd:
                    fan_out = measure_fan_out(cluster, workdir, n, runs=1, label=f"peer-{i}")
                    schedd_rates.append(fan_out["tasks_per_s_median"])
                else:
                    celery_rates.append(peer.fan_out(n))
    schedd_links = [c["gap_ms_median"] for c in schedd_chains]
    celery_links = [statistics.median(gaps) for gaps in celery_chains]
    every_celery_gap = [g for gaps in celery_chains for g in gaps]
    return {
        "processes": PROCESSES,
        "repetitions": rounds,
        "chain": {
            "links": links,
            "gap_ms_median": statistics.median(celery_links),
            "gap_ms_p90": percentile(every_celery_gap, 90),
            "gap_ms_p99": percentile(every_celery_gap, 99),
        },
        "fan_out": {"tasks": n, "runs": rounds, "tasks_per_s_median": statistics.median(celery_rates)},
        "schedd_chain_gap_ms_median": statistics.median(schedd_links),
        "schedd_fan_out_tasks_per_s_median": statistics.median(schedd_rates),
        "chain_x_celery": spread([s / c for s, c in zip(schedd_links, celery_links, strict=True)]),
        "fan_out_x_celery": spread([s / c for s, c in zip(schedd_rates, celery_rates, strict=True)]),
        "rounds": [
            {"schedd_chain_ms": s, "celery_chain_ms": c, "schedd_tasks_per_s": sr, "celery_tasks_per_s": cr}
            for s, c, sr, cr in zip(schedd_links, celery_links, schedd_rates, celery_rates, strict=True)
        ],
    }


def spread(ratios: list[float]) -> dict[str, float]:
    """The median of ``ratios`` and their least and greatest."""
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
