"""Holding a finished attempt's result back for a moment, so that results ending close together go
to the registry as one message.

Every message on the worker's stream costs both sides a write or a read, a wake-up of gRPC's
threads and of the event loop, whatever its size: on this project's 2-core machine about 0.2 ms of
CPU for a lone small message, against 0.03 ms for one of many written back to back. Results ready
together already go as one message (``schedd_rpc.stream_batches``); a fan-out's tasks, though, end
a little apart (about 1.5 results a message measured at 1,000 tasks/s on 4 workers). Waiting up to
``seconds`` after a result before sending it, while the worker runs other attempts that may end
meanwhile, gathers 3-4 a message there (docs/performance.md has the interleaved A/B).

What is and is not held:

- only a result is held, and only while another attempt of this worker is running: a lone task's
  result, and the last of a batch, go at once;
- a result whose slot the registry keeps for a successor (``Assignment.hands_off``: a chain's
  next link starts in the statement that applies it) is sent at once, and whatever waits goes with
  it (:meth:`ResultLinger.cut_short`);
- a held result's credit (the slot it frees) is held with it: at most ``seconds`` later, the
  registry can fill the slot.

Guaranteed: a wait ends after ``seconds`` at most, or at once once cut short (the newest wait, when
an older stream's is still ending). Not guaranteed: that results ending further apart than
``seconds`` share a message.
"""

from __future__ import annotations

import asyncio


class ResultLinger:
    """The wait before a message of results is sent: ``seconds`` (0: none)."""

    def __init__(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a result linger must not be negative, got {seconds}")
        self.seconds = seconds
        self._waiter: asyncio.Future[None] | None = None
        #: Something urgent was queued since the last wait: the next wait does not wait.
        self._urgent = False

    def cut_short(self) -> None:
        """An urgent message is queued: end the current wait now, or skip the next one."""
        self._urgent = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, others_running: bool) -> None:
        """Wait before sending a result, for up to ``seconds`` when ``others_running`` (another of
        the worker's attempts may end meanwhile) and nothing urgent was queued."""
        urgent, self._urgent = self._urgent, False
        if urgent or not others_running or self.seconds <= 0:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(self.seconds, _resolve, waiter)
        self._waiter = waiter
        try:
            await waiter
        finally:
            timer.cancel()
            if self._waiter is waiter:  # a newer wait (a new stream's, say) keeps its own
                self._waiter = None
                self._urgent = False


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
