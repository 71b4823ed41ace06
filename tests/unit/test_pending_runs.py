"""schedd_scheduler.pending: coalesced run changes, and changes that may wait (handed off)."""

from __future__ import annotations

import asyncio

from schedd_scheduler.pending import PendingRuns


async def test_a_handed_off_change_waits_for_its_delay_then_wakes_the_loop() -> None:
    pending = PendingRuns(handed_off_delay=0.05)
    pending.take(10)  # the term's first full scan
    pending.add_handed_off_payload("7/70,7/71")
    assert pending.take(10) == (False, {})
    await asyncio.wait_for(pending.wait(), timeout=5)
    assert pending.take(10) == (False, {7: {70, 71}})


async def test_a_handed_off_change_rides_with_its_runs_next_evaluation() -> None:
    pending = PendingRuns(handed_off_delay=3600)
    pending.take(10)
    pending.add_handed_off_payload("7/70,8/80")
    pending.add_payload("7/72")
    assert pending.take(10) == (False, {7: {70, 72}})
    # Already pending: the change joins the entry at once.
    pending.add_payload("9/90")
    pending.add_handed_off_payload("9/91")
    assert pending.take(10) == (False, {9: {90, 91}})


async def test_a_full_evaluation_wins_over_changes_that_waited() -> None:
    pending = PendingRuns(handed_off_delay=3600)
    pending.take(10)
    pending.add_handed_off_payload("7/70")
    pending.add([7])
    assert pending.take(10) == (False, {7: None})


async def test_a_malformed_handed_off_payload_is_ignored() -> None:
    pending = PendingRuns(handed_off_delay=0.01)
    pending.take(10)
    pending.add_handed_off_payload("x/1,2/")
    pending.add_handed_off_payload("3/30")
    await asyncio.wait_for(pending.wait(), timeout=5)
    assert pending.take(10) == (False, {3: {30}})
