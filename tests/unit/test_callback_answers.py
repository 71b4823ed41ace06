"""A Python callback sent to one worker is answered only by that worker
(``schedd_registry.callbacks.CallbackRelay``): another worker's stream naming its (sequential)
callback id changes nothing. The relay runs for real against worker sessions, without a database."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from schedd.v1 import worker_pb2
from schedd_registry.callbacks import CallbackRelay
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.sessions import WorkerSession


class _Connected:
    """The one thing the relay asks of a dispatcher here: the connected sessions."""

    def __init__(self, sessions: list[WorkerSession]) -> None:
        self.sessions = sessions


async def _sent(relay: CallbackRelay, holder: WorkerSession) -> tuple[asyncio.Future[None], str]:
    delivery = asyncio.ensure_future(relay._run_on_worker("tasks:notify", {"event": "success"}))
    sent = await asyncio.wait_for(holder.outbox.get(), 5.0)
    return delivery, sent.run_callback.callback_id


def _relay() -> tuple[CallbackRelay, WorkerSession]:
    holder = WorkerSession(worker_id="holder", queues=("default",), capacity=1)
    return CallbackRelay(cast(Any, None), cast(Dispatcher, _Connected([holder]))), holder


def test_another_worker_cannot_answer_a_callback_sent_to_one_worker() -> None:
    async def attack() -> None:
        relay, holder = _relay()
        delivery, callback_id = await _sent(relay, holder)
        relay.callback_done("intruder", worker_pb2.CallbackDone(callback_id=callback_id, ok=True))
        # The holder's failure still decides the delivery: the intruder's success was not taken.
        relay.callback_done("holder", worker_pb2.CallbackDone(callback_id=callback_id, ok=False, error="no"))
        with pytest.raises(RuntimeError, match="failed: no"):
            await asyncio.wait_for(delivery, 5.0)

    asyncio.run(attack())


def test_the_worker_the_callback_was_sent_to_answers_it() -> None:
    async def answer() -> None:
        relay, holder = _relay()
        delivery, callback_id = await _sent(relay, holder)
        relay.callback_done("holder", worker_pb2.CallbackDone(callback_id=callback_id, ok=True))
        await asyncio.wait_for(delivery, 5.0)

    asyncio.run(answer())


@pytest.mark.parametrize("worker_id", ["holder", "intruder"])
def test_an_answer_naming_an_unknown_callback_changes_nothing(worker_id: str) -> None:
    relay, _ = _relay()
    relay.callback_done(worker_id, worker_pb2.CallbackDone(callback_id="cb-999", ok=True))
    assert relay.delivered == 0
