"""Trigger rules: a verdict per rule from counts of upstream states, as Airflow decides."""

from __future__ import annotations

import itertools

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.triggers import TriggerRule, UpstreamCounts, Verdict, evaluate
from tests.unit.test_trigger_rules_airflow3 import NEW_TABLES

TR = TriggerRule
READY = Verdict.READY
WAIT = Verdict.WAIT
SKIP = Verdict.SKIP
UF = Verdict.UPSTREAM_FAILED

#: (total, success, failed, skipped) -> verdict, per rule. ``failed`` counts failed and upstream_failed.
Row = tuple[int, int, int, int, Verdict]

TABLES: dict[TriggerRule, list[Row]] = {
    TR.ALL_SUCCESS: [
        (0, 0, 0, 0, READY),  # no upstream
        (3, 0, 0, 0, WAIT),  # nothing finished
        (3, 2, 0, 0, WAIT),  # partial completion
        (3, 3, 0, 0, READY),
        (3, 1, 1, 0, UF),  # a failure decides at once, without waiting for the rest
        (3, 2, 0, 1, SKIP),
        (3, 0, 0, 1, SKIP),  # a skip decides at once too
        (3, 1, 1, 1, UF),  # failure wins over skip
    ],
    TR.ALL_FAILED: [
        (0, 0, 0, 0, READY),
        (2, 0, 0, 0, WAIT),
        (2, 0, 1, 0, WAIT),
        (2, 0, 2, 0, READY),
        (2, 1, 0, 0, SKIP),  # a success decides at once
        (2, 0, 1, 1, SKIP),
        (2, 1, 1, 0, SKIP),
    ],
    TR.ALL_DONE: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, WAIT),
        (3, 1, 1, 0, WAIT),
        (3, 1, 1, 1, READY),
        (3, 0, 3, 0, READY),
        (3, 0, 0, 3, READY),
        (3, 3, 0, 0, READY),
    ],
    TR.ONE_SUCCESS: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, WAIT),
        (3, 1, 0, 0, READY),  # does not wait for the others
        (3, 0, 2, 0, WAIT),
        (3, 0, 1, 1, WAIT),
        (3, 0, 3, 0, UF),
        (3, 0, 2, 1, UF),
        (3, 0, 0, 3, SKIP),  # every upstream skipped
        (3, 1, 2, 0, READY),
    ],
    TR.ONE_FAILED: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, WAIT),
        (3, 0, 1, 0, READY),  # does not wait for the others
        (3, 2, 0, 0, WAIT),
        (3, 2, 0, 1, SKIP),  # all done, nothing failed
        (3, 3, 0, 0, SKIP),
        (3, 0, 0, 3, SKIP),
        (3, 2, 1, 0, READY),
    ],
    TR.NONE_FAILED: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, WAIT),
        (3, 2, 0, 0, WAIT),
        (3, 1, 0, 1, WAIT),
        (3, 3, 0, 0, READY),
        (3, 1, 0, 2, READY),
        (3, 0, 0, 3, READY),  # all skipped still runs
        (3, 1, 1, 0, UF),
        (3, 0, 1, 2, UF),
    ],
    TR.NONE_FAILED_MIN_ONE_SUCCESS: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, WAIT),
        (3, 1, 0, 1, WAIT),
        (3, 0, 0, 2, WAIT),
        (3, 3, 0, 0, READY),
        (3, 1, 0, 2, READY),
        (3, 0, 0, 3, SKIP),  # no success at all
        (3, 1, 1, 0, UF),
        (3, 0, 1, 2, UF),
    ],
    TR.NONE_SKIPPED: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, WAIT),
        (3, 1, 1, 0, WAIT),
        (3, 2, 1, 0, READY),  # failures are fine
        (3, 0, 3, 0, READY),
        (3, 3, 0, 0, READY),
        (3, 0, 0, 1, SKIP),  # a skip decides at once
        (3, 1, 1, 1, SKIP),
    ],
    TR.ALWAYS: [
        (0, 0, 0, 0, READY),
        (3, 0, 0, 0, READY),  # does not wait at all
        (3, 1, 1, 0, READY),
        (3, 0, 3, 0, READY),
        (3, 0, 0, 3, READY),
    ],
}

CASES = [(rule, *row) for rule, rows in TABLES.items() for row in rows]


def test_every_rule_has_a_table() -> None:
    assert set(TABLES) | set(NEW_TABLES) == set(TriggerRule)


@pytest.mark.parametrize(
    ("rule", "total", "success", "failed", "skipped", "verdict"),
    CASES,
    ids=[f"{c[0]}-t{c[1]}s{c[2]}f{c[3]}k{c[4]}" for c in CASES],
)
def test_verdict_table(
    rule: TriggerRule, total: int, success: int, failed: int, skipped: int, verdict: Verdict
) -> None:
    counts = UpstreamCounts(total=total, success=success, failed=failed, skipped=skipped)
    assert evaluate(rule, counts) is verdict


def _airflow(rule: TriggerRule, total: int, success: int, failed: int, skipped: int) -> Verdict:
    """Airflow 2's TriggerRuleDep, restated: first the state it would set, then whether the dep passes."""
    if total == 0:
        return READY
    done = success + failed + skipped
    upstream_done = done >= total
    if rule is TR.ALL_SUCCESS:
        if failed:
            return UF
        if skipped:
            return SKIP
    elif rule is TR.ALL_FAILED:
        if success or skipped:
            return SKIP
    elif rule is TR.ONE_SUCCESS:
        if upstream_done and done == skipped:
            return SKIP
        if upstream_done and success <= 0:
            return UF
    elif rule is TR.ONE_FAILED:
        if upstream_done and not failed:
            return SKIP
    elif rule is TR.NONE_FAILED:
        if failed:
            return UF
    elif rule is TR.NONE_FAILED_MIN_ONE_SUCCESS:
        if failed:
            return UF
        if skipped == total:
            return SKIP
    elif rule is TR.NONE_SKIPPED and skipped:
        return SKIP
    passes = {
        TR.ALL_SUCCESS: success == total,
        TR.ALL_FAILED: failed == total,
        TR.ALL_DONE: upstream_done,
        TR.ONE_SUCCESS: success > 0,
        TR.ONE_FAILED: failed > 0,
        TR.NONE_FAILED: success + skipped == total,
        TR.NONE_FAILED_MIN_ONE_SUCCESS: success + skipped == total,
        TR.NONE_SKIPPED: upstream_done,
        TR.ALWAYS: True,
    }[rule]
    return READY if passes else WAIT


@pytest.mark.parametrize("rule", list(TABLES))
def test_matches_airflow_for_every_count_up_to_four_upstream(rule: TriggerRule) -> None:
    for total in range(5):
        for success, failed, skipped in itertools.product(range(total + 1), repeat=3):
            if success + failed + skipped > total:
                continue
            counts = UpstreamCounts(total=total, success=success, failed=failed, skipped=skipped)
            assert evaluate(rule, counts) is _airflow(rule, total, success, failed, skipped), counts


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_never_waits_once_every_upstream_is_done(rule: TriggerRule) -> None:
    # Otherwise a run could hang with all its upstream tasks finished.
    for success, failed, skipped in itertools.product(range(4), repeat=3):
        counts = UpstreamCounts(
            total=success + failed + skipped, success=success, failed=failed, skipped=skipped
        )
        assert evaluate(rule, counts) is not WAIT, counts


def test_done_counts_every_finished_upstream() -> None:
    assert UpstreamCounts(total=9, success=2, failed=3, skipped=1).done == 6
    assert UpstreamCounts(total=4).done == 0


def test_unspecified_proto_rule_means_all_success() -> None:
    assert TriggerRule.from_proto(pb.TRIGGER_RULE_UNSPECIFIED) is TR.ALL_SUCCESS


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_proto_round_trip(rule: TriggerRule) -> None:
    value = rule.to_proto()
    assert pb.TriggerRule.Name(pb.TriggerRule.ValueType(value)) == "TRIGGER_RULE_" + rule.name
    assert TriggerRule.from_proto(value) is rule


def test_every_proto_rule_has_a_trigger_rule() -> None:
    values = [v for v in pb.TriggerRule.values() if v != pb.TRIGGER_RULE_UNSPECIFIED]
    assert sorted(TriggerRule.from_proto(v).to_proto() for v in values) == sorted(values)
    assert len(values) == len(TriggerRule)
