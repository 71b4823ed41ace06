"""The dispatcher trusts a claim that found its queues empty for a while
(``schedd_registry.empty_queues``): credits granted meanwhile cost no claim, and nothing queued is
left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from schedd_core.clock import FakeClock
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.empty_queues import EMPTY_TRUSTED_FOR, EmptyQueues
from schedd_registry.sessions import WorkerSession


class _Builder:
    """Claims nothing; records each claim's queues. ``during`` runs inside the next claim."""

    def __init__(self) -> None:
        self.claims: list[tuple[str, ...]] = []
        self.during: list[object] = []

    async def claim(self, *, slots: Sequence[str], queues: Sequence[str]) -> list[object]:
        self.claims.append(tuple(queues))
        while self.during:
            self.during.pop()()  # type: ignore[operator]
        return []


def _setup() -> tuple[FakeClock, _Builder, Dispatcher, WorkerSession]:
    clock, builder = FakeClock(), _Builder()
    dispatcher = Dispatcher(None, builder, claim_batch=10, clock=clock)  # type: ignore[arg-type]
    session = WorkerSession(
        worker_id="w", queues=("a", "b"), capacity=4, credits=1, last_heard=clock.monotonic()
    )
    dispatcher.attach(session)
    return clock, builder, dispatcher, session


async def test_credits_granted_after_an_empty_claim_claim_nothing_until_a_queue_is_named() -> None:
    _, builder, dispatcher, session = _setup()
    await dispatcher._round()
    dispatcher.grant(session, 1)
    await dispatcher._round()
    assert len(builder.claims) == 1
    dispatcher.wake("b")  # the leader queued work in b
    await dispatcher._round()
    assert len(builder.claims) == 2
    dispatcher.wake("elsewhere")  # a queue this worker does not serve
    await dispatcher._round()
    assert len(builder.claims) == 2


async def test_a_notification_during_the_claim_voids_its_finding() -> None:
    _, builder, dispatcher, _ = _setup()
    builder.during.append(lambda: dispatcher.wake("a"))
    await dispatcher._round()
    await dispatcher._round()
    assert len(builder.claims) == 2


async def test_a_reconnected_listener_voids_every_finding() -> None:
    _, builder, dispatcher, _ = _setup()
    await dispatcher._round()
    await dispatcher.wake_async()
    await dispatcher._round()
    assert len(builder.claims) == 2


async def test_a_skipped_round_is_followed_by_one_once_the_finding_expires() -> None:
    clock, builder, dispatcher, _ = _setup()
    await dispatcher._round()
    await dispatcher._round()  # skipped: schedules a round at the expiry
    assert dispatcher._recheck is not None
    dispatcher._wake.clear()
    clock.advance(EMPTY_TRUSTED_FOR)
    await asyncio.wait_for(dispatcher._wake.wait(), timeout=EMPTY_TRUSTED_FOR + 5)
    await dispatcher._round()
    assert len(builder.claims) == 2


def test_a_finding_covers_only_the_queues_claimed_and_only_while_trusted() -> None:
    clock = FakeClock()
    empty = EmptyQueues(clock)
    assert empty.empty_until(["a"]) is None
    empty.found_empty(["a"], empty.before_claim())
    assert empty.empty_until(["a"]) == clock.monotonic() + EMPTY_TRUSTED_FOR
    assert empty.empty_until(["a", "b"]) is None
    clock.advance(EMPTY_TRUSTED_FOR)
    assert empty.empty_until(["a"]) is None
