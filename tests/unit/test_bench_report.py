"""The benchmark's targets table (tests.benchmarks.report): the ratios to Celery come from the rounds
measured side by side and show their spread; the chain is held against the link's floor."""

from __future__ import annotations

from typing import Any

from tests.benchmarks.peers import spread
from tests.benchmarks.report import table, verdicts


def _rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["what"]: r for r in verdicts(results)}


def test_the_ratios_to_celery_are_the_side_by_side_rounds_median_with_their_spread() -> None:
    results = {
        "celery": {
            "chain": {"gap_ms_median": 1.0},  # Celery's own figure: not what the ratio is read from
            "chain_x_celery": spread([0.9, 1.2, 0.8, 1.1, 0.95]),
            "fan_out_x_celery": spread([2.5, 3.2, 3.1]),
        },
        "chain": {"gap_ms_median": 5.0},
    }
    rows = _rows(results)
    chain = next(r for w, r in rows.items() if w.startswith("the chain median against Celery"))
    fan_out = next(r for w, r in rows.items() if w.startswith("the same against Celery"))
    assert chain["measured"] == 0.95 and chain["met"] is True and chain["spread"] == (0.8, 1.2)
    assert fan_out["measured"] == 3.1 and fan_out["met"] is True and fan_out["spread"] == (2.5, 3.2)
    markdown = table(list(rows.values()), None)
    assert "| 0.95 x (0.80-1.20) | <= 1 x | met |" in markdown
    assert "| 3.10 x (2.50-3.20) | >= 3 x | met |" in markdown


def test_without_the_peer_the_ratios_are_not_measured() -> None:
    rows = _rows({"celery": {"skipped": "no Redis"}, "chain": {"gap_ms_median": 2.0}})
    ratios = [r for w, r in rows.items() if "Celery" in w]
    assert len(ratios) == 2 and all(r["met"] is None and r["spread"] is None for r in ratios)


def test_the_chain_median_is_held_against_four_times_the_link_floor() -> None:
    within = _rows({"chain": {"gap_ms_median": 4.0}, "floors": {"chain_link_floor_ms": 1.0}})
    beyond = _rows({"chain": {"gap_ms_median": 4.4}, "floors": {"chain_link_floor_ms": 1.0}})
    what = next(w for w in within if "against the link's floor" in w)
    assert within[what]["measured"] == 4.0 and within[what]["met"] is True
    assert beyond[what]["met"] is False
