"""The registry's servicer and dispatcher and the worker agent read time only from the clock they are
given: with a fake one, time moves only when the test moves it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from schedd.v1 import worker_pb2
from schedd_core.clock import FakeClock
from schedd_registry.config import RegistryConfig
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.servicer import WorkerRegistryServicer
from schedd_registry.sessions import WorkerSession
from schedd_rpc import convert
from tests.unit.worker_agents import unconnected_agent


class _Builder:
    """Records the claims a dispatch round makes; claims nothing."""

    def __init__(self) -> None:
        self.claims: list[list[str]] = []

    async def claim(self, *, slots: Sequence[str], queues: Sequence[str]) -> list[object]:
        self.claims.append(list(slots))
        return []


def _dispatcher(clock: FakeClock, builder: _Builder) -> Dispatcher:
    return Dispatcher(None, builder, claim_batch=10, clock=clock)  # type: ignore[arg-type]


@pytest.mark.parametrize(("idle", "window"), [(False, 3.0), (True, 13.0)])
def test_the_dispatcher_skips_a_worker_silent_longer_than_its_window_by_the_injected_clock(
    idle: bool, window: float
) -> None:
    # The default windows: an ack window of 3 s, and idle heartbeats every 10 s on top for a worker
    # that said it holds nothing.
    clock, builder = FakeClock(), _Builder()
    dispatcher = _dispatcher(clock, builder)
    session = WorkerSession(
        worker_id="w", queues=("default",), capacity=2, credits=2, last_heard=clock.monotonic(), idle=idle
    )
    dispatcher.attach(session)
    asyncio.run(dispatcher._round())
    clock.advance(window)  # at the window: still heard
    asyncio.run(dispatcher._round())
    assert builder.claims == [["w", "w"], ["w", "w"]]
    clock.advance(0.001)
    asyncio.run(dispatcher._round())
    assert len(builder.claims) == 2


def test_a_worker_whose_heartbeat_holds_nothing_and_accounts_for_everything_sent_is_idle() -> None:
    session = WorkerSession(worker_id="w", queues=("default",), capacity=2)
    session.heard(1.0, holds_attempts=False)
    assert session.idle
    session.sent_assignments([worker_pb2.AttemptRef(attempt_id="a")])
    session.heard(2.0, holds_attempts=False)  # the heartbeat left before the assignment arrived
    assert not session.idle
    session.heard(3.0, holds_attempts=True)
    assert not session.idle and session.last_heard == 3.0


def test_a_stored_heartbeat_marks_the_worker_heard_at_the_injected_clocks_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def record_worker_heartbeat(*_args: object, **_kwargs: object) -> list[object]:
        return []

    monkeypatch.setattr("schedd_store.dispatch.record_worker_heartbeat", record_worker_heartbeat)
    clock = FakeClock()
    dispatcher = _dispatcher(clock, _Builder())
    servicer = WorkerRegistryServicer(
        None,  # type: ignore[arg-type]  # the store is replaced above
        dispatcher,
        RegistryConfig(database_url="", identity="r"),
        clock=clock,
    )
    session = WorkerSession(worker_id="w", queues=("default",), capacity=1, last_heard=clock.monotonic())
    clock.advance(42.0)
    asyncio.run(servicer._heartbeat(worker_pb2.TaskHeartbeat(sequence=7), session))
    assert session.last_heard == clock.monotonic()
    assert session.outbox.get_nowait().heartbeat_ack.sequence == 7


def test_the_worker_ends_an_assignment_it_hands_back_at_the_injected_clocks_time(tmp_path: Path) -> None:
    clock = FakeClock()
    clock.advance(3600.5)

    async def hand_back() -> list[worker_pb2.WorkerMessage]:
        agent = unconnected_agent(tmp_path, clock)
        outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
        agent._outgoing = outgoing
        agent.draining = True
        attempt = worker_pb2.AttemptRef(task_instance_id=1, attempt_id="a", try_number=1)
        agent._handle(
            worker_pb2.RegistryMessage(assignment=worker_pb2.Assignment(task_id="t", attempt=attempt))
        )
        return [outgoing.get_nowait() for _ in range(outgoing.qsize())]

    log, result = asyncio.run(hand_back())
    assert result.result.outcome == worker_pb2.TASK_OUTCOME_ABANDONED
    assert convert.from_ts(result.result.end_time) == clock.now()
    assert log.log.data.startswith(
        "2026-01-01T01:00:00.500Z [schedd] try 1 was stopped: the worker is draining"
    )


def test_a_worker_passed_over_as_silent_gets_work_as_soon_as_it_is_heard() -> None:
    clock, builder = FakeClock(), _Builder()
    dispatcher = _dispatcher(clock, builder)
    session = WorkerSession(
        worker_id="w", queues=("default",), capacity=2, credits=2, last_heard=clock.monotonic()
    )
    dispatcher.attach(session)
    clock.advance(4.0)  # a busy worker's ack window (3 s) passed without a heartbeat
    asyncio.run(dispatcher._round())
    assert builder.claims == [] and not dispatcher._wake.is_set()
    session.heard(clock.monotonic(), holds_attempts=False)
    dispatcher.heard(session)  # what the servicer does once the heartbeat is stored
    assert dispatcher._wake.is_set()
    asyncio.run(dispatcher._round())
    assert builder.claims == [["w", "w"]]
