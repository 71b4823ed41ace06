"""Trigger rules: when a task may run, given what its upstream tasks did.

``evaluate`` is a pure function of the counts of upstream states. It answers
READY, WAIT, SKIP or UPSTREAM_FAILED with the semantics Airflow users know.
A task without upstream tasks is always READY.
"""

from __future__ import annotations

import enum
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
    total: int
    success: int = 0
    failed: int = 0  # failed or upstream_failed
    skipped: int = 0

    @property
    def done(self) -> int:
        return self.success + self.failed + self.skipped


def evaluate(rule: TriggerRule, c: UpstreamCounts) -> Verdict:
    """Decide whether a task with trigger ``rule`` can run given its upstream counts."""
    if c.total == 0 or rule is TriggerRule.ALWAYS:
        return Verdict.READY
    all_done = c.done == c.total
    match rule:
        case TriggerRule.ALL_SUCCESS:
            if c.failed:
                return Verdict.UPSTREAM_FAILED
            if c.skipped:
                return Verdict.SKIP
            return Verdict.READY if c.success == c.total else Verdict.WAIT
        case TriggerRule.ALL_FAILED:
            if c.success or c.skipped:
                return Verdict.SKIP
            return Verdict.READY if c.failed == c.total else Verdict.WAIT
        case TriggerRule.ALL_DONE:
            return Verdict.READY if all_done else Verdict.WAIT
        case TriggerRule.ONE_SUCCESS:
            if c.success:
                return Verdict.READY
            if not all_done:
                return Verdict.WAIT
            return Verdict.SKIP if c.skipped == c.total else Verdict.UPSTREAM_FAILED
        case TriggerRule.ONE_FAILED:
            if c.failed:
                return Verdict.READY
            return Verdict.SKIP if all_done else Verdict.WAIT
        case TriggerRule.NONE_FAILED:
            if c.failed:
                return Verdict.UPSTREAM_FAILED
            return Verdict.READY if all_done else Verdict.WAIT
        case TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS:
            if c.failed:
                return Verdict.UPSTREAM_FAILED
            if not all_done:
                return Verdict.WAIT
            return Verdict.READY if c.success else Verdict.SKIP
        case TriggerRule.NONE_SKIPPED:
            if c.skipped:
                return Verdict.SKIP
            return Verdict.READY if all_done else Verdict.WAIT
    raise AssertionError(f"unhandled trigger rule {rule}")
