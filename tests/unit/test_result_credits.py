"""A finished task's slot travels with its result (``TaskResult.credit``): one message per task, the
credit granted before the result is applied (a hand-off may keep it), and never again when the
result is sent a second time on a new stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from schedd.v1 import worker_pb2
from schedd_core.clock import FakeClock
from schedd_core.errors import Unavailable
from schedd_exec.assignments import Built
from schedd_registry.config import RegistryConfig
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.results import Applied
from schedd_registry.servicer import WorkerRegistryServicer
from schedd_registry.sessions import WorkerSession
from schedd_store.dispatch import AttemptResult, ReportStatus
from schedd_worker.agent import WorkerAgent
from tests.unit.worker_agents import unconnected_agent

ATTEMPT = worker_pb2.AttemptRef(task_instance_id=1, attempt_id="a", try_number=1)


def _finish(tmp_path: Path, *, draining: bool) -> tuple[list[worker_pb2.WorkerMessage], WorkerAgent]:
    async def finish() -> tuple[list[worker_pb2.WorkerMessage], WorkerAgent]:
        agent = unconnected_agent(tmp_path)
        outgoing: asyncio.Queue[worker_pb2.WorkerMessage] = asyncio.Queue()
        agent._outgoing = outgoing
        agent.draining = draining
        # never heard by its registry lately: the worker holds the assignment for a heartbeat's ack
        # (a draining one hands it straight back); the stream ends first, so it is handed back
        agent._handle(
            worker_pb2.RegistryMessage(assignment=worker_pb2.Assignment(task_id="t", attempt=ATTEMPT))
        )
        agent._held.hand_back_all("the stream to the registry ended")
        return [outgoing.get_nowait() for _ in range(outgoing.qsize())], agent

    return asyncio.run(finish())


def test_the_result_carries_the_slot_it_freed_and_no_separate_credit_is_sent(tmp_path: Path) -> None:
    sent, agent = _finish(tmp_path, draining=False)
    assert [m.WhichOneof("message") for m in sent] == ["log", "result"]
    assert sent[-1].result.credit == 1
    assert agent._unacked["a"].credit == 0, "the result sent again on a new stream frees nothing more"


def test_a_draining_worker_frees_no_slot(tmp_path: Path) -> None:
    sent, _ = _finish(tmp_path, draining=True)
    assert sent[-1].result.credit == 0


def _servicer(
    clock: FakeClock | None = None, builder: object = None
) -> tuple[WorkerRegistryServicer, Dispatcher]:
    """A registry's stream servicer and its dispatcher (claiming with ``builder``), with no database."""
    clock = clock or FakeClock()
    dispatcher = Dispatcher(None, builder, claim_batch=10, clock=clock)  # type: ignore[arg-type]
    servicer = WorkerRegistryServicer(
        None,  # type: ignore[arg-type]
        dispatcher,
        RegistryConfig(database_url="", identity="r"),
        clock=clock,
    )
    return servicer, dispatcher


def test_the_registry_grants_the_credit_before_applying_the_result() -> None:
    servicer, _ = _servicer()
    session = WorkerSession(worker_id="w", queues=("default",), capacity=4, credits=1)
    seen: list[int] = []

    async def report(_result: worker_pb2.TaskResult, reporting: WorkerSession) -> None:
        seen.append(reporting.credits)

    servicer.reports.report = report  # type: ignore[method-assign, assignment]

    async def messages() -> AsyncIterator[worker_pb2.WorkerMessage]:
        yield worker_pb2.WorkerMessage(result=worker_pb2.TaskResult(attempt=ATTEMPT, credit=1))
        yield worker_pb2.WorkerMessage(result=worker_pb2.TaskResult(attempt=ATTEMPT))  # a resent one
        # results that were ready together: each as if sent alone
        together = [worker_pb2.TaskResult(attempt=ATTEMPT, credit=1) for _ in range(2)]
        yield worker_pb2.WorkerMessage(results=worker_pb2.TaskResults(results=together))

    asyncio.run(servicer._read(messages(), session))
    # four reports, each run once the credits that came with the results were granted
    assert seen == [4, 4, 4, 4]


class _BusyQueue:
    """Claims whatever slots it is asked for: work queued elsewhere (a burst of other runs)."""

    def __init__(self) -> None:
        self.claimed = 0

    async def claim(self, *, slots: list[str], queues: tuple[str, ...]) -> list[Built]:
        self.claimed += len(slots)
        refs = [worker_pb2.AttemptRef(attempt_id=f"burst-{i}") for i in range(len(slots))]
        assignments = [worker_pb2.Assignment(task_id="burst", attempt=a) for a in refs]
        return [Built(w, a) for w, a in zip(slots, assignments, strict=True)]


def test_a_success_keeps_its_credit_for_its_successor_while_other_work_is_queued() -> None:
    """The result's credit is granted and its hand-off decided in the same step: the dispatcher round
    the grant wakes, with other work queued, cannot spend the credit first (the successor would then
    wait for the leader, behind that work)."""
    clock = FakeClock()
    queue = _BusyQueue()
    servicer, dispatcher = _servicer(clock, queue)
    session = WorkerSession(worker_id="w", queues=("default",), capacity=1, last_heard=clock.monotonic())
    session.hands_off.add(ATTEMPT.attempt_id)
    dispatcher.attach(session)
    kept: list[bool] = []

    async def submit(item: AttemptResult) -> Applied:
        kept.append(item.hand_off)
        return Applied(ReportStatus.APPLIED, None)

    servicer.reports.batcher.submit = submit  # type: ignore[method-assign]

    async def messages() -> AsyncIterator[worker_pb2.WorkerMessage]:
        yield worker_pb2.WorkerMessage(
            result=worker_pb2.TaskResult(attempt=ATTEMPT, outcome=worker_pb2.TASK_OUTCOME_SUCCEEDED, credit=1)
        )

    async def scenario() -> None:
        rounds = asyncio.create_task(dispatcher.run())
        await asyncio.sleep(0)  # the dispatcher waits for a wake-up
        try:
            await asyncio.wait_for(servicer._read(messages(), session), timeout=10)
        finally:
            rounds.cancel()

    asyncio.run(scenario())
    assert kept == [True], "the credit the result brought was spent on other work before its hand-off"


def test_acks_that_came_together_each_let_the_worker_forget_its_result(tmp_path: Path) -> None:
    _, agent = _finish(tmp_path, draining=False)
    agent._unacked["b"] = worker_pb2.TaskResult()
    acks = [worker_pb2.ReportAck(attempt=worker_pb2.AttemptRef(attempt_id=a)) for a in ("a", "b")]
    agent._handle(worker_pb2.RegistryMessage(acks=worker_pb2.ReportAcks(acks=acks)))
    assert agent._unacked == {}


def test_a_stream_the_registry_ends_fails_with_unavailable_after_its_welcome() -> None:
    """``WorkerSession.end`` (a successor handed off to the worker could not be sent): the stream
    ends with UNAVAILABLE, and the worker connects again (its hello accounts for its attempts)."""
    servicer, dispatcher = _servicer()

    async def registered(*_args: object) -> bool:
        return False

    servicer._register = registered  # type: ignore[method-assign, assignment]

    async def scenario() -> list[str]:
        open_until_ended = asyncio.Event()

        async def messages() -> AsyncIterator[worker_pb2.WorkerMessage]:
            yield worker_pb2.WorkerMessage(hello=worker_pb2.WorkerHello(worker_id="w", capacity=2))
            await open_until_ended.wait()

        seen: list[str] = []
        stream = servicer.Connect(messages(), None)
        seen.append(str((await anext(stream)).WhichOneof("message")))
        session = dispatcher.session("w")
        assert session is not None
        session.end("a successor could not be sent")
        with pytest.raises(Unavailable, match="a successor could not be sent"):
            await anext(stream)
        open_until_ended.set()
        return seen

    assert asyncio.run(scenario()) == ["welcome"]
