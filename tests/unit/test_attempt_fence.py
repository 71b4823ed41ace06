"""The attempt fence sleeps while nothing runs and nothing is watched, and a group is never watched
under a stale deadline (``schedd_exec.attempt_fence``, ``Reaper.before_watch``)."""

from __future__ import annotations

import asyncio

from schedd_core.clock import FakeClock
from schedd_core.permits import AttemptWindows, Permit
from schedd_exec.attempt_fence import AttemptFence
from schedd_exec.reaper import Reaper

WINDOWS = AttemptWindows(heartbeat_interval=0.02, ack_window=0.06, silence_limit=30)
WAIT = 5.0


class _RecordingReaper(Reaper):
    """A reaper with no process: records each deadline it is given and each line it would send."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.refreshed = asyncio.Event()
        self.forgotten = asyncio.Event()

    def deadline(self, at: float) -> None:
        self.events.append("refresh")
        self.refreshed.set()
        super().deadline(at)

    def _send(self, line: str) -> None:
        self.events.append(line)
        if line.startswith("forget "):
            self.forgotten.set()


def _idle_fence() -> tuple[FakeClock, Permit, _RecordingReaper, asyncio.Task[None]]:
    """A running fence with nothing running, its permit acknowledged once (call inside a loop)."""
    clock = FakeClock()
    permit = Permit(WINDOWS, 0.0, clock)
    permit.sent(1)
    permit.acknowledged(1)
    reaper = _RecordingReaper()
    fence = AttemptFence(permit, reaper, clock, running=lambda: 0, stop_all=lambda _why: None)
    return clock, permit, reaper, asyncio.create_task(fence.run())


def test_an_idle_fence_sleeps_and_a_new_group_is_watched_under_a_current_deadline() -> None:
    async def main() -> None:
        clock, permit, reaper, task = _idle_fence()
        try:
            async with asyncio.timeout(WAIT):
                await reaper.refreshed.wait()
            await asyncio.sleep(0.2)  # ten refresh intervals
            assert reaper.events.count("refresh") == 1  # nothing runs, nothing is watched: no refresh
            clock.advance(1.0)
            permit.sent(2)
            permit.acknowledged(2)  # the permit moved on; nobody poked the fence
            reaper.watch(42)
            fresh = f"deadline {permit.until()}"
            assert reaper.events[-2:] == [fresh, "watch 42"]  # the current deadline goes first
            reaper.refreshed.clear()
            for _ in range(3):  # and while the group is watched, the fence refreshes again
                async with asyncio.timeout(WAIT):
                    await reaper.refreshed.wait()
                reaper.refreshed.clear()
        finally:
            task.cancel()

    asyncio.run(main())


def test_a_reused_child_costs_the_reaper_no_message_and_an_idle_one_is_forgotten_after_a_refresh() -> None:
    async def main() -> None:
        _clock, _permit, reaper, task = _idle_fence()
        try:
            reaper.watch(42)  # a warm child's first attempt
            reaper.release(42)  # it ended; the child lives on
            sent = [e for e in reaper.events if e != "refresh"]
            reaper.watch(42)  # the same child's next attempt
            reaper.release(42)
            assert [e for e in reaper.events if e != "refresh"] == sent  # nothing more was sent
            assert reaper.watching  # and the fence keeps the deadline current meanwhile
            async with asyncio.timeout(WAIT):
                await reaper.forgotten.wait()  # a refresh interval later: forgotten
            assert "forget 42" in reaper.events
            assert not reaper.watching
            await asyncio.sleep(0.1)  # five refresh intervals
            settled = len(reaper.events)
            await asyncio.sleep(0.2)
            assert len(reaper.events) == settled  # asleep again: nothing runs, nothing is watched
        finally:
            task.cancel()

    asyncio.run(main())
