"""A finished attempt's result waits a moment, while other attempts run, so results ending a little
apart share a stream message (``schedd_worker.result_linger``); a hand-off's result does not wait.

The agent's own stream (``WorkerAgent._session``) runs against a stand-in for the registry's stub
that records each message the worker writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from schedd.v1 import worker_pb2
from schedd_exec.executor import AttemptExecutor
from schedd_exec.outcome import Outcome
from schedd_worker.agent import WorkerAgent
from schedd_worker.result_linger import ResultLinger
from tests.unit.worker_agents import unconnected_agent

#: Long enough never to end by itself within a test: a result that arrives promptly did not wait it out.
FOREVER = 3600.0
#: Bound on waiting for a message the worker should write.
DEADLINE = 10.0


class _Registry:
    """Stands in for the stub: ``Connect`` records what the worker writes, and answers nothing until
    the test ends."""

    def __init__(self) -> None:
        self.written: list[worker_pb2.WorkerMessage] = []
        #: Set whenever the worker writes a message.
        self.wrote = asyncio.Event()
        self._end = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    def Connect(self, requests: AsyncIterator[worker_pb2.WorkerMessage], metadata: Any = None) -> Any:
        self._reader = asyncio.ensure_future(self._read(requests))
        registry = self

        class Call:
            def __aiter__(self) -> Call:
                return self

            async def __anext__(self) -> worker_pb2.RegistryMessage:
                await registry._end.wait()
                raise StopAsyncIteration

            def cancel(self) -> None:
                registry._end.set()

        return Call()

    async def _read(self, requests: AsyncIterator[worker_pb2.WorkerMessage]) -> None:
        async for message in requests:
            self.written.append(message)
            self.wrote.set()

    def results(self) -> list[list[str]]:
        """The attempt ids of each message of results written, in order."""
        out = []
        for m in self.written:
            if m.WhichOneof("message") == "result":
                out.append([m.result.attempt.attempt_id])
            elif m.WhichOneof("message") == "results":
                out.append([r.attempt.attempt_id for r in m.results.results])
        return out

    def end(self) -> None:
        self._end.set()


def _assignment(attempt_id: str, *, hands_off: bool = False) -> worker_pb2.Assignment:
    return worker_pb2.Assignment(
        task_id=attempt_id,
        attempt=worker_pb2.AttemptRef(task_instance_id=1, attempt_id=attempt_id, try_number=1),
        hands_off=hands_off,
    )


def _succeeded() -> Outcome:
    now = datetime.now(UTC)
    return Outcome(True, 0, "", now, now)


async def _turns(n: int = 20) -> None:
    """Let the event loop run the stream's tasks for a while (no time passes on purpose)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def _until(registry: _Registry, condition: Any) -> None:
    async with asyncio.timeout(DEADLINE):
        while True:
            registry.wrote.clear()
            if condition():
                return
            await registry.wrote.wait()


def _agent(tmp_path: Path, linger: float) -> WorkerAgent:
    agent = unconnected_agent(tmp_path)
    agent._linger = ResultLinger(linger)
    return agent


def _stream(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    linger: float,
    others_running: int,
    scenario: Any,
) -> list[list[str]]:
    """Runs ``scenario(agent, registry)`` on a connected stream while ``others_running`` other
    attempts run; returns the results messages written."""
    monkeypatch.setattr(AttemptExecutor, "running_count", property(lambda _self: others_running))

    async def run() -> list[list[str]]:
        agent = _agent(tmp_path, linger)
        registry = _Registry()
        session = asyncio.ensure_future(agent._session(registry))  # type: ignore[arg-type]
        await _until(registry, lambda: len(registry.written) >= 1)  # the hello
        try:
            await scenario(agent, registry)
        finally:
            registry.end()
            with pytest.raises(Exception):  # noqa: B017  # the stand-in ends the stream: UNAVAILABLE
                await session
        return registry.results()

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("linger", "second_hands_off"),
    [
        # without the wait, a1 goes alone as soon as it is queued
        pytest.param(0.3, False, id="results ending apart while others run go as one message"),
        # the linger never ends by itself: the hand-off's result ends it
        pytest.param(FOREVER, True, id="a hand-off's result is sent at once with what waits"),
    ],
)
def test_a_result_waits_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linger: float, second_hands_off: bool
) -> None:
    async def scenario(agent: WorkerAgent, registry: _Registry) -> None:
        agent._done(_assignment("a1"), _succeeded())
        await _turns()
        assert registry.results() == [], "the first result waits while other attempts run"
        agent._done(_assignment("a2", hands_off=second_hands_off), _succeeded())
        await _until(registry, registry.results)

    assert _stream(tmp_path, monkeypatch, linger, 1, scenario) == [["a1", "a2"]]


@pytest.mark.parametrize(
    ("linger", "others_running", "hands_off"),
    [
        pytest.param(FOREVER, 1, True, id="a hand-off's result does not wait"),
        pytest.param(FOREVER, 0, False, id="a result with nothing else running does not wait"),
        pytest.param(0.05, 3, False, id="a waiting result goes once the linger is over"),
    ],
)
def test_a_lone_result_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linger: float, others_running: int, hands_off: bool
) -> None:
    async def scenario(agent: WorkerAgent, registry: _Registry) -> None:
        agent._done(_assignment("a1", hands_off=hands_off), _succeeded())
        await _until(registry, registry.results)

    assert _stream(tmp_path, monkeypatch, linger, others_running, scenario) == [["a1"]]


def test_a_cut_short_before_the_wait_skips_it_once() -> None:
    async def scenario() -> None:
        linger = ResultLinger(FOREVER)
        linger.cut_short()
        await asyncio.wait_for(linger.wait(others_running=True), DEADLINE)
        waiting = asyncio.ensure_future(linger.wait(others_running=True))
        await _turns()
        assert not waiting.done(), "only the next wait is skipped"
        linger.cut_short()
        await asyncio.wait_for(waiting, DEADLINE)

    asyncio.run(scenario())


def test_an_older_wait_ending_leaves_the_newer_one_to_be_cut_short() -> None:
    """An ended stream's wait may still be running when a new stream's begins (a reconnect)."""

    async def scenario() -> None:
        linger = ResultLinger(0.01)
        older = asyncio.ensure_future(linger.wait(others_running=True))
        await _turns()
        linger.seconds = FOREVER
        newer = asyncio.ensure_future(linger.wait(others_running=True))
        await _turns()
        await asyncio.wait_for(older, DEADLINE)
        linger.cut_short()
        await asyncio.wait_for(newer, DEADLINE)

    asyncio.run(scenario())


def test_a_negative_linger_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        ResultLinger(-0.001)
