"""Trigger rules: when a task may run, given what its upstream tasks did.

``evaluate`` is a pure function of the counts of upstream states. It answers
READY, WAIT, SKIP or UPSTREAM_FAILED with Airflow 3's semantics (its
``TriggerRuleDep``), rule by rule, including when a verdict is reached before
every upstream task is done. A task without upstream tasks is always READY.
Removed upstream tasks are not counted at all (the caller leaves them out).

``evaluate_setups`` is Airflow's *setup constraint*: a task inside the scope of
a setup task that is not its direct upstream (an *indirect* setup) runs only
once every such setup succeeded. ``tests/unit/test_triggers.py`` holds a table
per rule and upstream state combination.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from schedd.v1 import resources_pb2 as pb


class TriggerRule(enum.StrEnum):
    ALL_SUCCESS = "all_success"
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    NONE_SKIPPED = "none_skipped"
    ALWAYS = "always"
    ONE_DONE = "one_done"
    ALL_SKIPPED = "all_skipped"
    ALL_DONE_MIN_ONE_SUCCESS = "all_done_min_one_success"
    #: The rule of teardown tasks, and only theirs.
    ALL_DONE_SETUP_SUCCESS = "all_done_setup_success"

    @classmethod
    def from_proto(cls, value: int) -> TriggerRule:
        if value == pb.TRIGGER_RULE_UNSPECIFIED:
            return cls.ALL_SUCCESS
        name = pb.TriggerRule.Name(pb.TriggerRule.ValueType(value)).removeprefix("TRIGGER_RULE_").lower()
        return cls(name)

    def to_proto(self) -> int:
        return int(pb.TriggerRule.Value("TRIGGER_RULE_" + self.value.upper()))


class Verdict(enum.Enum):
    READY = "ready"
    WAIT = "wait"
    SKIP = "skip"
    UPSTREAM_FAILED = "upstream_failed"


@dataclass(frozen=True)
class UpstreamCounts:
    """How many direct upstream tasks (removed ones left out) are in which finished state."""

    total: int
    success: int = 0
    #: failed or upstream_failed.
    failed: int = 0
    skipped: int = 0
    #: Of ``failed``, those upstream_failed (``one_done`` does not count them as done).
    upstream_failed: int = 0
    #: Of ``total``, the setup tasks, and of those the ones that succeeded and were skipped.
    setups: int = 0
    setup_success: int = 0
    setup_skipped: int = 0

    @property
    def done(self) -> int:
        return self.success + self.failed + self.skipped


def _all_success(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.failed:
        return Verdict.UPSTREAM_FAILED
    if c.skipped:
        return Verdict.SKIP
    return Verdict.READY if c.success == c.total else Verdict.WAIT


def _all_failed(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.success or c.skipped:
        return Verdict.SKIP
    return Verdict.READY if c.failed == c.total else Verdict.WAIT


def _all_done(c: UpstreamCounts, all_done: bool) -> Verdict:
    return Verdict.READY if all_done else Verdict.WAIT


def _one_success(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.success:
        return Verdict.READY
    if not all_done:
        return Verdict.WAIT
    return Verdict.SKIP if c.skipped == c.total else Verdict.UPSTREAM_FAILED


def _one_failed(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.failed:
        return Verdict.READY
    return Verdict.SKIP if all_done else Verdict.WAIT


def _none_failed(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.failed:
        return Verdict.UPSTREAM_FAILED
    return Verdict.READY if all_done else Verdict.WAIT


def _none_failed_min_one_success(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.failed:
        return Verdict.UPSTREAM_FAILED
    if not all_done:
        return Verdict.WAIT
    return Verdict.READY if c.success else Verdict.SKIP


def _none_skipped(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.skipped:
        return Verdict.SKIP
    return Verdict.READY if all_done else Verdict.WAIT


def _one_done(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.success or c.failed - c.upstream_failed:
        return Verdict.READY
    return Verdict.SKIP if all_done else Verdict.WAIT


def _all_skipped(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.success or c.failed:
        return Verdict.SKIP
    return Verdict.READY if c.skipped == c.total else Verdict.WAIT


def _all_done_min_one_success(c: UpstreamCounts, all_done: bool) -> Verdict:
    if c.skipped:
        return Verdict.SKIP  # Airflow: a skipped upstream is not "done" for this rule
    if not all_done:
        return Verdict.WAIT
    return Verdict.READY if c.success else Verdict.UPSTREAM_FAILED


def _all_done_setup_success(c: UpstreamCounts, all_done: bool) -> Verdict:
    if not all_done:
        return Verdict.WAIT
    if c.setups and c.setup_skipped >= c.setups:
        return Verdict.SKIP
    if c.setups and not c.setup_success:
        return Verdict.UPSTREAM_FAILED
    return Verdict.READY


#: Each rule's decision, given the upstream counts and whether every upstream task is done.
_RULES: dict[TriggerRule, Callable[[UpstreamCounts, bool], Verdict]] = {
    TriggerRule.ALL_SUCCESS: _all_success,
    TriggerRule.ALL_FAILED: _all_failed,
    TriggerRule.ALL_DONE: _all_done,
    TriggerRule.ONE_SUCCESS: _one_success,
    TriggerRule.ONE_FAILED: _one_failed,
    TriggerRule.NONE_FAILED: _none_failed,
    TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS: _none_failed_min_one_success,
    TriggerRule.NONE_SKIPPED: _none_skipped,
    TriggerRule.ONE_DONE: _one_done,
    TriggerRule.ALL_SKIPPED: _all_skipped,
    TriggerRule.ALL_DONE_MIN_ONE_SUCCESS: _all_done_min_one_success,
    TriggerRule.ALL_DONE_SETUP_SUCCESS: _all_done_setup_success,
}


def evaluate(rule: TriggerRule, c: UpstreamCounts) -> Verdict:
    """Decide whether a task with trigger ``rule`` can run given its upstream counts."""
    if c.total == 0 or rule is TriggerRule.ALWAYS:
        return Verdict.READY
    decide = _RULES.get(rule)
    if decide is None:
        raise AssertionError(f"unhandled trigger rule {rule}")
    return decide(c, c.done == c.total)


def evaluate_setups(c: UpstreamCounts) -> Verdict:
    """Airflow's setup constraint over a task's indirect setups (counted in ``c``): a failure
    (failed or upstream_failed) makes the task UPSTREAM_FAILED and a skip SKIPPED at once; it is
    READY (its own trigger rule decides next) once all of them succeeded, and WAITs until then."""
    if c.failed:
        return Verdict.UPSTREAM_FAILED
    if c.skipped:
        return Verdict.SKIP
    return Verdict.READY if c.success == c.total else Verdict.WAIT
