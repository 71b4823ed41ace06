"""Running a sensor task: poking its function until its condition holds, or its timeout passes.

A sensor's Python function returns ``true`` when its condition holds and ``false`` (or ``null``)
when it does not yet, or an object ``{"is_done": bool, "xcom_value": ...}`` (what
``schedd_sdk.PokeReturnValue`` becomes): once done, ``xcom_value`` is the task's result.

- ``poke`` mode pokes inside one attempt, sleeping ``poke_interval`` between pokes: the attempt
  keeps its worker slot and pool slot until the condition holds or the timeout passes.
- ``reschedule`` mode pokes once per attempt: when the condition does not hold yet, the attempt
  ends with "reschedule at T" (the next poke time) and the task instance waits, holding no slot,
  in ``up_for_reschedule`` until the leader queues its next poke, in the same try.

The timeout counts from the first poke of the try (``Assignment.first_poke_time`` carries it from
one reschedule-mode attempt to the next); a poke that ends past it fails the task without retries
(as Airflow's sensor timeout does), or skips it with ``soft_fail``. A next poke is never planned
past the timeout: the last one comes at the timeout. A poke that raises fails the attempt like
any Python task (retries apply). ``execution_timeout`` bounds each poke, not the wait.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from schedd.v1 import resources_pb2 as pb, worker_pb2
from schedd_exec.outcome import Outcome

Poke = Callable[[worker_pb2.Assignment], Awaitable[Outcome]]


class BadVerdict(ValueError):
    """A sensor function returned something that is neither a bool nor a poke verdict."""


def parse_verdict(result_json: str) -> tuple[bool, str]:
    """``(is_done, result JSON)`` of what a sensor function returned (its JSON text)."""
    value = json.loads(result_json) if result_json else None
    if value is None or isinstance(value, bool):
        return bool(value), ""
    if (
        isinstance(value, dict)
        and isinstance(value.get("is_done"), bool)
        and set(value) <= {"is_done", "xcom_value"}
    ):
        xcom = value.get("xcom_value")
        return value["is_done"], "" if xcom is None else json.dumps(xcom)
    raise BadVerdict(
        "a sensor must return a bool or a PokeReturnValue(is_done, xcom_value), not " + result_json[:200]
    )


async def poke_until_done(
    assignment: worker_pb2.Assignment,
    poke: Poke,
    *,
    now: Callable[[], datetime] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Outcome:
    """Run the sensor of ``assignment`` (``Assignment.sensor`` set), each poke through ``poke``;
    ``now`` and ``sleep`` are the clock (UTC) and how poke mode waits between pokes."""
    clock = now or (lambda: datetime.now(UTC))
    spec = assignment.sensor
    started = clock()
    first_poke = (
        assignment.first_poke_time.ToDatetime(tzinfo=UTC)
        if assignment.HasField("first_poke_time")
        else started
    )
    interval = spec.poke_interval.ToTimedelta()
    deadline = first_poke + spec.timeout.ToTimedelta() if spec.HasField("timeout") else None
    while True:
        out = await poke(assignment)
        if not out.succeeded or out.abandoned:
            return replace(out, started_at=started)
        try:
            done, result_json = parse_verdict(out.result_json)
        except (BadVerdict, json.JSONDecodeError) as exc:
            return Outcome(False, 1, str(exc), started, out.ended_at)
        if done:
            return replace(out, started_at=started, result_json=result_json)
        moment = clock()
        if deadline is not None and moment >= deadline:
            return _timed_out(spec, started, moment)
        next_poke = moment + interval
        if deadline is not None:
            next_poke = min(next_poke, deadline)
        if spec.mode == pb.SENSOR_MODE_RESCHEDULE:
            return Outcome(True, 0, "", started, moment, reschedule_at=next_poke)
        await sleep(max(0.0, (next_poke - clock()).total_seconds()))


def _timed_out(spec: pb.SensorSpec, started: datetime, ended: datetime) -> Outcome:
    limit = spec.timeout.ToTimedelta() / timedelta(seconds=1)
    if spec.soft_fail:
        return Outcome(
            False,
            0,
            f"the sensor's condition did not hold within {limit:g}s (soft_fail: skipped)",
            started,
            ended,
            skipped=True,
        )
    return Outcome(
        False,
        1,
        f"the sensor's condition did not hold within its timeout of {limit:g}s",
        started,
        ended,
        no_retry=True,
    )
