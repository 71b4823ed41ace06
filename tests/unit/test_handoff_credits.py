"""The registry's side of a hand-off: a credit kept for the successor is spent on it or given back,
so a worker never gets more assignments than it has free slots, and none is lost."""

from __future__ import annotations

import asyncio

from schedd.v1 import worker_pb2
from schedd_exec.assignments import Built
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.sessions import WorkerSession


def _session(credits: int) -> WorkerSession:
    session = WorkerSession(worker_id="w", queues=("default",), capacity=4, credits=credits)
    session.hands_off.add("a1")
    return session


def _dispatcher() -> Dispatcher:
    return Dispatcher(None, None, claim_batch=10)  # type: ignore[arg-type]


def _built(attempt_id: str) -> Built:
    assignment = worker_pb2.Assignment(
        attempt=worker_pb2.AttemptRef(task_instance_id=2, attempt_id=attempt_id), hands_off=True
    )
    return Built("w", assignment)


def test_a_credit_is_kept_only_for_an_attempt_that_hands_off_and_only_if_there_is_one() -> None:
    assert not _session(1).keep_for_hand_off("other")
    assert not _session(0).keep_for_hand_off("a1")
    draining = _session(1)
    draining.draining = True
    assert not draining.keep_for_hand_off("a1")
    session = _session(2)
    assert session.keep_for_hand_off("a1")
    assert session.credits == 1
    assert not session.keep_for_hand_off("a1"), "one credit per attempt"


def test_the_kept_credit_is_spent_on_the_successor() -> None:
    async def scenario() -> None:
        session = _session(1)
        assert session.keep_for_hand_off("a1")
        await _dispatcher().hand_off_done(session, _built("b1"))
        assert session.credits == 0
        message = session.outbox.get_nowait()
        assert [a.attempt.attempt_id for a in message.assignments.assignments] == ["b1"]
        assert "b1" in session.hands_off, "the successor may hand off in turn"
        assert [a.attempt_id for a in session.unconfirmed] == ["b1"]

    asyncio.run(scenario())


def test_a_credit_kept_for_nothing_is_given_back() -> None:
    async def scenario() -> None:
        session = _session(1)
        assert session.keep_for_hand_off("a1")
        await _dispatcher().hand_off_done(session, None)
        assert session.credits == 1
        assert session.outbox.empty()

    asyncio.run(scenario())
