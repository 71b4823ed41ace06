"""A term's end stops every leader helper, also one whose first cancellation was swallowed (as
``asyncio.wait_for`` can do in Python 3.11 when the awaited event is set at the same moment)."""

from __future__ import annotations

import asyncio

from schedd_scheduler.leadership import cancel_until_done


def test_a_helper_that_swallows_a_cancellation_is_cancelled_again() -> None:
    async def scenario() -> int:
        swallowed = 0

        async def stubborn() -> None:
            nonlocal swallowed
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    swallowed += 1
                    if swallowed > 1:
                        raise  # the second one ends it

        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_until_done([task]), 10)
        assert task.cancelled()
        return swallowed

    assert asyncio.run(scenario()) == 2
