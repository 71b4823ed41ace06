"""Retry delays: fixed, or exponential backoff with jitter and a cap.

``retry_delay(policy, failed_try, jitter)`` is pure: the caller supplies ``jitter``
in [0, 1) (random in production, fixed in tests). With exponential backoff the
delay after try ``n`` is ``delay * 2**(n-1)``, capped at ``max_delay``, then
scaled into ``[0.75, 1.0]`` of that by the jitter, so retries of many tasks that
failed together spread out, and each retry of one task still waits longer than
the one before it (until the cap).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedd.v1 import resources_pb2 as pb

#: The delay when a task with retries names none (Airflow's default).
DEFAULT_RETRY_DELAY = 300.0
JITTER_SPAN = 0.25


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 0
    delay: float = DEFAULT_RETRY_DELAY
    exponential: bool = False
    #: 0 for no cap.
    max_delay: float = 0.0

    @classmethod
    def from_spec(cls, task: pb.TaskSpec) -> RetryPolicy:
        delay = (
            task.retry_delay.ToTimedelta().total_seconds()
            if task.HasField("retry_delay")
            else DEFAULT_RETRY_DELAY
        )
        cap = task.max_retry_delay.ToTimedelta().total_seconds() if task.HasField("max_retry_delay") else 0.0
        return cls(
            retries=task.retries, delay=delay, exponential=task.retry_exponential_backoff, max_delay=cap
        )


def retry_delay(policy: RetryPolicy, failed_try: int, jitter: float) -> float:
    """Seconds to wait after try ``failed_try`` (1 for the first attempt) failed."""
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if not policy.exponential:
        return min(policy.delay, policy.max_delay) if policy.max_delay else policy.delay
    # The exponent is bounded so that thousands of retries cannot overflow; the cap applies anyway.
    base = policy.delay * 2.0 ** min(max(failed_try - 1, 0), 60)
    if policy.max_delay:
        base = min(base, policy.max_delay)
    return base * (1.0 - JITTER_SPAN + JITTER_SPAN * jitter)
