"""Notifiers: Python classes that deliver an event (a task's failure, retry or success, a run's
failure or success, a missed deadline) somewhere, as Airflow's ``BaseNotifier``.

Subclass :class:`Notifier`, implement :meth:`Notifier.notify`, and pass the class where a callback
goes: ``on_failure=Callback.notifier(PagerNotifier)``. It runs on a worker (importable there, like a
task function) with the event as a dict: ``event``, ``dag_id``, ``run_id``, ``task_id`` for a task's
event, ``deadline`` for a missed one, and ``event_id``, the same at every delivery of one event.
Delivery is at least once: a notifier that raises is retried with backoff (so it should dedupe on
``event_id``), and given up after the relay's attempts.
"""

from __future__ import annotations

from typing import Any


class Notifier:
    def notify(self, event: dict[str, Any]) -> None:
        """Deliver ``event``; raise to have it retried."""
        raise NotImplementedError

    @classmethod
    def deliver(cls, params: dict[str, Any]) -> None:
        """What the worker calls: a new notifier notified of the event (its ``params``)."""
        cls().notify(dict(params))
