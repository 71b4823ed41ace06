"""``make bench BASELINE=REF``: the working tree against REF, interleaved in one run.

Timings on a shared machine vary by 20-50 % from one minute to the next, so a figure is only
compared with one measured beside it: REF is checked out in a temporary worktree, and the benchmark
groups asked for (``--only``, default ``latency,throughput``) run alternately on REF and on the working
tree (``--pairs`` times; the baseline first in odd pairs, the candidate first in even ones, since
this machine favoured whichever ran first: :func:`run_order`), each run a separate ``tests.benchmarks.run``
process on its own tree's code (``PYTHONPATH``). For every figure both runs have, the report gives the
baseline and candidate medians and the candidate/baseline ratio of each pair: their median, their
spread, and whether every pair agrees (the only verdict a noisy machine supports). Lower is better for
every figure but rates (``per_s``).

Not guaranteed: REF must have a ``tests.benchmarks.run`` that takes ``--only`` and ``--out``, and
import with the packages installed here.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: Fewer pairs than this give ratios but no verdict: one or two pairs agree by chance too often.
MIN_PAIRS_FOR_VERDICT = 3
#: Figures that are results of a run's set-up rather than of its speed.
NOT_FIGURES = ("machine", "bench_seconds", "links", "tasks", "runs", "repetitions", "processes")


def flatten(results: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of the results, by its dotted path; lists and set-up counts left out."""
    figures: dict[str, float] = {}
    for key, value in results.items():
        if key in NOT_FIGURES:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            figures |= flatten(value, f"{path}.")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            figures[path] = float(value)
    return figures


def higher_is_better(figure: str) -> bool:
    return "per_s" in figure


def compare(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per figure that every run has: medians, the ratios of the pairs (candidate over
    baseline), and ``verdict``: ``better`` or ``worse`` when every pair says so, else ``same``
    (``too few pairs`` under :data:`MIN_PAIRS_FOR_VERDICT`)."""
    flat = [(flatten(base), flatten(candidate)) for base, candidate in pairs]
    common = set.intersection(*(set(b) & set(c) for b, c in flat)) if flat else set()
    rows = []
    for figure in sorted(common):
        ratios = [c[figure] / b[figure] for b, c in flat if b[figure]]
        if not ratios:
            continue
        gains = [r > 1 if higher_is_better(figure) else r < 1 for r in ratios]
        verdict = "better" if all(gains) else "worse" if not any(gains) else "same"
        if len(ratios) < MIN_PAIRS_FOR_VERDICT:
            verdict = "too few pairs"
        rows.append(
            {
                "figure": figure,
                "baseline": statistics.median(b[figure] for b, _ in flat),
                "candidate": statistics.median(c[figure] for _, c in flat),
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "verdict": verdict,
            }
        )
    return rows


def table(rows: list[dict[str, Any]], ref: str, pairs: int) -> str:
    chance = 2 ** (1 - pairs)
    lines = [
        f"candidate (working tree) / baseline ({ref}), {pairs} interleaved pairs",
        "",
        f"With no real difference, all {pairs} pairs still agree by chance for {chance:.0%} of the figures:",
        "a verdict is a place to look, and more pairs make it stronger.",
        "",
        "| figure | baseline | candidate | ratio (median) | ratios (min-max) | every pair |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['figure']} | {r['baseline']:.4g} | {r['candidate']:.4g} | {r['ratio_median']:.3f} "
            f"| {r['ratio_min']:.3f}-{r['ratio_max']:.3f} | {r['verdict']} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def worktree(ref: str) -> Iterator[Path]:
    """REF checked out (detached) in a temporary worktree, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="schedd-bench-baseline-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), ref], check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)


def run_once(tree: Path, only: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """One benchmark run on ``tree``'s code, its results read back."""
    path = os.pathsep.join(str(tree / p) for p in ("libs", "services", "devtools", "."))
    env = {**os.environ, "PYTHONPATH": path}
    command = [sys.executable, "-m", "tests.benchmarks.run", "--only", only, "--out", str(out), *extra]
    subprocess.run(command, cwd=tree, env=env, check=True)
    loaded: dict[str, Any] = json.loads(out.read_text())
    return loaded


def run_order(pair: int) -> tuple[str, str]:
    """Which tree runs first in pair ``pair`` (from 0): the baseline in even ones, the candidate in
    odd ones. Two A/Bs of the same two trees with the baseline always first each put the tree that
    ran second slower (1.07x and 1.13x on the chain's median), so an order held fixed would pass a
    bias of the machine for a difference of the code."""
    return ("baseline", "candidate") if pair % 2 == 0 else ("candidate", "baseline")


def interleaved(ref: str, only: str, pairs: int, out: Path, extra: list[str]) -> list[dict[str, Any]]:
    """Baseline and candidate in turn, in the order :func:`run_order` gives: ``pairs`` of each; the
    comparison is written to ``out`` (JSON), its table next to it (``.md``) and printed."""
    runs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    scratch = Path(tempfile.mkdtemp(prefix="schedd-bench-ab-"))
    with worktree(ref) as base:
        trees = {"baseline": (base, f"baseline {ref}"), "candidate": (ROOT, "candidate (working tree)")}
        for i in range(pairs):
            measured: dict[str, dict[str, Any]] = {}
            for side in run_order(i):
                tree, label = trees[side]
                print(f"== pair {i + 1}/{pairs}: {label}", flush=True)
                measured[side] = run_once(tree, only, scratch / f"{side}-{i}.json", extra)
            runs.append((measured["baseline"], measured["candidate"]))
    rows = compare(runs)
    out.write_text(json.dumps({"baseline": ref, "pairs": runs, "comparison": rows}, indent=2, default=str))
    markdown = table(rows, ref, pairs)
    out.with_suffix(".md").write_text(markdown + "\n")
    print(markdown)
    print(f"written to {out} and {out.with_suffix('.md')}; single runs in {scratch}")
    return rows
