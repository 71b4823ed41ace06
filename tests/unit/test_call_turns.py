"""Turns at the api's database shared between callers: the pure logic of ``schedd_rpc.call_turns``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from schedd_rpc.access import AccessInterceptor
from schedd_rpc.call_turns import CallTurns


async def settle() -> None:
    """Let every task that can run, run (each step of a turn is one wake-up)."""
    for _ in range(10):
        await asyncio.sleep(0)


class Callers:
    """Calls that take a turn each and hold it until released, recording the order they got in."""

    def __init__(self, turns: CallTurns) -> None:
        self.turns = turns
        self.order: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def call(self, lane: str, name: str) -> None:
        self._release[name] = asyncio.Event()

        async def run() -> None:
            async with self.turns.turn(lane):
                self.order.append(name)
                await self._release[name].wait()

        self.tasks[name] = asyncio.create_task(run())

    async def end(self, name: str) -> None:
        self._release[name].set()
        await self.tasks[name]
        await settle()


async def test_a_lone_call_behind_a_flood_gets_the_next_turn() -> None:
    callers = Callers(CallTurns(2))
    for i in range(6):
        callers.call("flood", f"f{i}")
    await settle()
    callers.call("other", "o")
    await settle()
    assert callers.order == ["f0", "f1"]
    await callers.end("f0")  # the flood's lane waited first: its next call goes in
    await callers.end("f1")  # then the other lane's, before the flood's third
    assert callers.order == ["f0", "f1", "f2", "o"]
    await callers.end("f2")
    await callers.end("o")
    assert callers.order == ["f0", "f1", "f2", "o", "f3", "f4"]


async def test_waiting_lanes_take_turns_in_round_robin_and_each_keeps_its_own_order() -> None:
    callers = Callers(CallTurns(1))
    callers.call("a", "a0")
    await settle()
    for name in ("a1", "a2", "b0", "b1", "c0"):
        callers.call(name[0], name)
        await settle()
    for name in ("a0", "a1", "b0", "c0", "a2", "b1"):
        await callers.end(name)
    assert callers.order == ["a0", "a1", "b0", "c0", "a2", "b1"]


async def test_at_most_capacity_turns_are_held_and_a_freed_turn_is_taken_again() -> None:
    turns = CallTurns(3)
    callers = Callers(turns)
    for i in range(5):
        callers.call("x", f"x{i}")
    await settle()
    assert callers.order == ["x0", "x1", "x2"]
    assert turns.waiting == 2
    for i in range(5):
        await callers.end(f"x{i}")
    callers.call("y", "y0")
    await settle()
    assert callers.order[-1] == "y0" and turns.waiting == 0


async def test_a_call_cancelled_while_waiting_takes_no_turn_and_leaves_its_lane() -> None:
    turns = CallTurns(1)
    callers = Callers(turns)
    callers.call("a", "a0")
    callers.call("b", "b0")
    callers.call("c", "c0")
    await settle()
    callers.tasks["b0"].cancel()
    await settle()
    assert turns.waiting == 1
    await callers.end("a0")
    assert callers.order == ["a0", "c0"]
    with pytest.raises(asyncio.CancelledError):
        await callers.tasks["b0"]


async def test_a_call_cancelled_as_its_turn_came_passes_the_turn_on() -> None:
    turns = CallTurns(1)
    callers = Callers(turns)
    go = asyncio.Event()

    async def holder() -> None:
        async with turns.turn("a"):
            await go.wait()
        callers.tasks["b0"].cancel()  # b0 was handed the turn just now and has not run yet

    first = asyncio.create_task(holder())
    await settle()
    callers.call("b", "b0")
    callers.call("c", "c0")
    await settle()
    go.set()
    await first
    await settle()
    assert callers.order == ["c0"]
    assert turns.waiting == 0


async def test_a_turn_is_given_back_when_its_holder_raises() -> None:
    turns = CallTurns(1)
    with pytest.raises(RuntimeError):
        async with turns.turn("a"):
            raise RuntimeError("the handler failed")
    async with asyncio.timeout(5):
        async with turns.turn("b"):
            assert turns.waiting == 0


async def test_the_gauge_counts_the_calls_waiting() -> None:
    registry = CollectorRegistry()
    callers = Callers(CallTurns(1, registry=registry))
    for i in range(4):
        callers.call("a", f"a{i}")
    await settle()
    assert registry.get_sample_value("schedd_api_calls_waiting") == 3
    for i in range(4):
        await callers.end(f"a{i}")
    assert registry.get_sample_value("schedd_api_calls_waiting") == 0


def test_a_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        CallTurns(0)


class _Context:
    """What the access interceptor asks of a call's context on these calls."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"


class _NoCallers:
    """Authentication is off in these calls, and they are not audited: nothing asks the database."""

    async def principal_of(self, token: object) -> str:
        raise AssertionError("not asked")

    async def record(self, entry: object) -> None:
        raise AssertionError("not asked")

    def is_transient(self, exc: BaseException) -> bool:
        return False


async def _call_through(interceptor: AccessInterceptor, method: str, inner: Any) -> asyncio.Task[Any]:
    """A task making one unary call of ``method`` through ``interceptor`` to ``inner``."""

    async def continuation(_: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(inner)

    details = SimpleNamespace(method=method, invocation_metadata=())
    handler = await interceptor.intercept_service(continuation, details)
    return asyncio.create_task(handler.unary_unary(b"", _Context()))


async def test_calls_of_an_exempt_method_take_no_turn() -> None:
    get_leader, get_dag = "/schedd.v1.ClusterService/GetLeader", "/schedd.v1.DagService/GetDag"
    turns = CallTurns(1, exempt=frozenset({get_leader}))
    interceptor = AccessInterceptor(_NoCallers(), [], enabled=False, call_turns=turns)
    etcd_answers = asyncio.Event()

    async def waits_on_etcd(_: bytes, __: Any) -> str:
        await etcd_answers.wait()
        return "leader"

    async def reads(_: bytes, __: Any) -> str:
        return "dag"

    async def holds(_: bytes, __: Any) -> str:
        await etcd_answers.wait()
        return "held"

    leaders = [await _call_through(interceptor, get_leader, waits_on_etcd) for _ in range(3)]
    await settle()
    async with asyncio.timeout(5):
        assert await (await _call_through(interceptor, get_dag, reads)) == "dag"
    holder = await _call_through(interceptor, get_dag, holds)  # takes the one turn
    await settle()
    waiting = await _call_through(interceptor, get_dag, reads)
    await settle()
    assert not waiting.done() and turns.waiting == 1
    etcd_answers.set()
    assert await asyncio.gather(*leaders, holder, waiting) == ["leader"] * 3 + ["held", "dag"]
