"""An idle worker heartbeats seldom; work that reaches it while its permit lapsed waits for the
acknowledgement of a heartbeat sent at once (``schedd_worker.heartbeats``,
``schedd_worker.held_assignments``, the agent's use of both)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from schedd.v1 import worker_pb2
from schedd_core.permits import AttemptWindows
from schedd_worker.agent import WorkerAgent
from schedd_worker.heartbeats import HeartbeatCadence
from schedd_worker.held_assignments import UNHEARD, HeldAssignments
from tests.unit.worker_agents import unconnected_agent

#: Bound on every wait below; the intervals under test are far shorter, or far longer.
WAIT = 5.0
IDLE = AttemptWindows(heartbeat_interval=0.02, ack_window=0.1, silence_limit=60, idle_heartbeat_interval=30)


async def _until(condition: Callable[[], bool], changed: asyncio.Event) -> None:
    """Wait (bounded) until ``condition()``, checking it each time ``changed`` is set."""
    async with asyncio.timeout(WAIT):
        while not condition():
            changed.clear()
            await changed.wait()


async def _next(outgoing: asyncio.Queue[worker_pb2.WorkerMessage]) -> worker_pb2.WorkerMessage:
    async with asyncio.timeout(WAIT):
        return await outgoing.get()


Body = Callable[[HeartbeatCadence, list[float], list[bool], asyncio.Event], Awaitable[None]]


def _cadence_test(body: Body) -> None:
    async def main() -> None:
        beats: list[float] = []
        busy = [False]
        beaten = asyncio.Event()

        def beat() -> None:
            beats.append(asyncio.get_running_loop().time())
            beaten.set()

        cadence = HeartbeatCadence(lambda: busy[0], lambda: IDLE)
        runner = asyncio.create_task(cadence.run(beat))
        try:
            await body(cadence, beats, busy, beaten)
        finally:
            runner.cancel()

    asyncio.run(main())


def test_an_idle_worker_waits_its_idle_interval_and_a_busy_one_beats_every_interval() -> None:
    async def body(
        cadence: HeartbeatCadence, beats: list[float], busy: list[bool], beaten: asyncio.Event
    ) -> None:
        await _until(lambda: len(beats) == 1, beaten)
        await asyncio.sleep(0.2)  # ten busy intervals: an idle worker sends nothing more
        assert len(beats) == 1
        busy[0] = True
        cadence.became_busy()  # wakes the idle wait: the next beat is one interval after the last
        await _until(lambda: len(beats) >= 4, beaten)

    _cadence_test(body)


def test_a_heartbeat_asked_for_goes_at_once() -> None:
    async def body(
        cadence: HeartbeatCadence, beats: list[float], busy: list[bool], beaten: asyncio.Event
    ) -> None:
        await _until(lambda: len(beats) == 1, beaten)
        cadence.now()
        await _until(lambda: len(beats) == 2, beaten)  # the idle interval is 30 s

    _cadence_test(body)


def _assignment(attempt_id: str) -> worker_pb2.Assignment:
    return worker_pb2.Assignment(
        task_id="t", attempt=worker_pb2.AttemptRef(task_instance_id=1, attempt_id=attempt_id, try_number=1)
    )


def test_held_assignments_are_released_in_order_or_handed_back_after_the_window() -> None:
    async def main() -> None:
        back: list[tuple[str, str]] = []
        handed = asyncio.Event()

        def hand_back(assignment: worker_pb2.Assignment, why: str) -> None:
            back.append((assignment.attempt.attempt_id, why))
            handed.set()

        held = HeldAssignments(hand_back)
        held.hold(_assignment("a"), 30)
        held.hold(_assignment("b"), 30)
        held.hold(_assignment("c"), 30)
        assert [r.attempt_id for r in held.refs()] == ["a", "b", "c"]
        assert held.take("b") is not None and held.take("b") is None
        assert [a.attempt.attempt_id for a in held.release()] == ["a", "c"]
        assert not held
        held.hold(_assignment("d"), 0.05)
        await _until(lambda: bool(back), handed)
        assert back == [("d", UNHEARD)] and not held
        held.hold(_assignment("e"), 30)
        held.hand_back_all("draining")
        assert back[-1] == ("e", "draining")

    asyncio.run(main())


@pytest.fixture
def agent(tmp_path: Path) -> WorkerAgent:
    return unconnected_agent(tmp_path)


def _sent(outgoing: asyncio.Queue[worker_pb2.WorkerMessage]) -> list[worker_pb2.WorkerMessage]:
    return [outgoing.get_nowait() for _ in range(outgoing.qsize())]


def test_work_reaching_a_lapsed_worker_waits_for_the_heartbeat_it_asks_for(
    agent: WorkerAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    monkeypatch.setattr(agent.executor, "submit", lambda a: started.append(a.attempt.attempt_id))

    async def main() -> None:
        outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
        agent._outgoing = outgoing
        assert not agent.permit.may_start()  # never acknowledged
        heartbeats = asyncio.create_task(agent._cadence.run(agent._heartbeat))
        assert (await _next(outgoing)).HasField("heartbeat")  # the first, idle, heartbeat
        agent._handle(worker_pb2.RegistryMessage(assignment=_assignment("a")))
        agent._handle(worker_pb2.RegistryMessage(assignment=_assignment("b")))
        beat = await _next(outgoing)  # asked for at once, not after the idle interval (10 s)
        assert [r.attempt_id for r in beat.heartbeat.attempts] == ["a", "b"]  # held ones are listed
        assert started == []
        ack = worker_pb2.HeartbeatAck(sequence=beat.heartbeat.sequence)
        agent._handle(worker_pb2.RegistryMessage(heartbeat_ack=ack))
        assert started == ["a", "b"]
        assert _sent(outgoing) == []  # nothing handed back
        heartbeats.cancel()

    asyncio.run(main())


def test_work_held_for_the_whole_ack_window_is_handed_back(agent: WorkerAgent) -> None:
    async def main() -> None:
        outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
        agent._outgoing = outgoing
        agent.permit.granted(AttemptWindows(heartbeat_interval=0.01, ack_window=0.05, silence_limit=30))
        agent._handle(worker_pb2.RegistryMessage(assignment=_assignment("a")))
        while not (message := await _next(outgoing)).HasField("result"):
            assert message.HasField("log")  # how it ended, ahead of the result
        result = message.result
        assert result.outcome == worker_pb2.TASK_OUTCOME_ABANDONED
        assert UNHEARD in result.error

    asyncio.run(main())


def test_a_worker_that_turned_idle_says_so_one_interval_after_its_last_heartbeat() -> None:
    async def body(
        cadence: HeartbeatCadence, beats: list[float], busy: list[bool], beaten: asyncio.Event
    ) -> None:
        await _until(lambda: len(beats) == 1, beaten)
        busy[0] = True
        cadence.became_busy()
        await _until(lambda: len(beats) == 2, beaten)
        busy[0] = False  # its last attempt ended: the next beat, due as a busy one, says it is idle
        await _until(lambda: len(beats) == 3, beaten)  # the idle interval is 30 s
        await asyncio.sleep(0.2)
        assert len(beats) == 3  # and then it waits out the idle interval

    _cadence_test(body)
