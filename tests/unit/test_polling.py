"""The tests' bounded wait: returns the first truthy value, names what it awaited when it gives up."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.polling import wait_until, wait_until_async


def test_it_returns_the_first_truthy_value() -> None:
    values = iter([None, 0, "", "found", "later"])
    assert wait_until("a value", lambda: next(values), 5, interval=0) == "found"


def test_it_names_what_it_waited_for_when_the_time_is_up() -> None:
    probes = itertools.count()
    with pytest.raises(AssertionError, match=r"timed out after 0\.05s waiting for the impossible"):
        wait_until("the impossible", lambda: next(probes) < 0, 0.05, interval=0.01)
    assert next(probes) >= 2  # it probed more than once before giving up


def test_an_error_of_the_probe_fails_at_once_unless_it_is_retried() -> None:
    def not_up() -> bool:
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError):
        wait_until("a server", not_up, 5)
    with pytest.raises(AssertionError, match=r"last error: ConnectionError\('refused'\)"):
        wait_until("a server", not_up, 0.05, interval=0.01, retry_on=(ConnectionError,))


def test_the_async_wait_awaits_a_coroutine_probe_and_lets_the_loop_run() -> None:
    async def scenario() -> int:
        box: list[int] = []

        async def probe() -> int | None:
            return box[0] if box else None

        asyncio.get_running_loop().call_soon(box.append, 7)
        return await wait_until_async("the value to be set", probe, 5, interval=0)

    assert asyncio.run(scenario()) == 7
