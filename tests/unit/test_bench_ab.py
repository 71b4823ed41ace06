"""The comparison of interleaved benchmark runs (tests.benchmarks.ab): which figures, which ratios,
and a verdict only where every pair agrees."""

from __future__ import annotations

from typing import Any

from tests.benchmarks.ab import compare, flatten, run_order


def test_flatten_keeps_numeric_leaves_by_path_and_leaves_out_lists_and_set_up_counts() -> None:
    results = {
        "machine": {"cpus": 2},
        "chain": {"links": 100, "gap_ms_median": 20.0, "gaps_ms": [1.0, 2.0], "ok": True},
        "fan_out_4_workers": {"tasks_per_s_median": 400},
    }
    assert flatten(results) == {"chain.gap_ms_median": 20.0, "fan_out_4_workers.tasks_per_s_median": 400.0}


Results = dict[str, Any]


def _pair(base_ms: float, cand_ms: float, base_rate: float, cand_rate: float) -> tuple[Results, Results]:
    def run(ms: float, rate: float) -> Results:
        return {"chain": {"gap_ms_median": ms}, "fan_out": {"tasks_per_s_median": rate}}

    return run(base_ms, base_rate), run(cand_ms, cand_rate)


def test_a_figure_is_better_or_worse_only_when_every_pair_says_so() -> None:
    pairs = [_pair(20, 10, 400, 800), _pair(30, 12, 500, 600), _pair(10, 4, 100, 300)]
    rows = {r["figure"]: r for r in compare(pairs)}
    chain, rate = rows["chain.gap_ms_median"], rows["fan_out.tasks_per_s_median"]
    assert chain["verdict"] == "better" and rate["verdict"] == "better"
    assert chain["ratio_min"] == 0.4 and chain["ratio_max"] == 0.5 and chain["ratio_median"] == 0.4
    assert chain["baseline"] == 20 and chain["candidate"] == 10

    pairs = [_pair(10, 20, 800, 400), _pair(10, 11, 800, 700), _pair(10, 12, 800, 790)]
    worse = {r["figure"]: r for r in compare(pairs)}
    assert worse["chain.gap_ms_median"]["verdict"] == "worse"
    assert worse["fan_out.tasks_per_s_median"]["verdict"] == "worse"

    pairs = [_pair(10, 9, 800, 900), _pair(10, 11, 800, 700), _pair(10, 9, 800, 900)]
    mixed = {r["figure"]: r for r in compare(pairs)}
    assert mixed["chain.gap_ms_median"]["verdict"] == "same"
    assert mixed["fan_out.tasks_per_s_median"]["verdict"] == "same"


def test_one_or_two_pairs_give_ratios_but_no_verdict() -> None:
    (row, _) = compare([_pair(20, 10, 400, 800), _pair(30, 12, 500, 600)])
    assert row["verdict"] == "too few pairs" and row["ratio_max"] == 0.5


def test_only_figures_every_run_has_are_compared() -> None:
    base, cand = _pair(10, 9, 800, 900)
    del cand["fan_out"]
    assert [r["figure"] for r in compare([(base, cand)])] == ["chain.gap_ms_median"]


def test_each_tree_runs_first_in_every_other_pair() -> None:
    orders = [run_order(i) for i in range(4)]
    assert orders == [("baseline", "candidate"), ("candidate", "baseline")] * 2
