"""A worker's report of how an attempt ended, as the registry hands it to the store.

A plain record: ``schedd_store.dispatch`` applies it, ``schedd_store.sensors`` applies the sensor
outcomes among them and ``schedd_store.report_status`` tells the refused ones apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class AttemptResult:
    """A worker's report of how an attempt ended; applied only to that whole attempt (task instance,
    try number and attempt id), and only if ``worker_id`` (the reporting stream's worker) holds it."""

    worker_id: str
    ti_id: int
    attempt_id: str
    try_number: int
    succeeded: bool
    exit_code: int
    error: str
    ended_at: datetime
    #: When the worker started the attempt's process; None keeps the claim time.
    started_at: datetime | None = None
    #: JSON of the value the task returned; "" for none.
    result_json: str = ""
    abandoned: bool = False
    #: A failure that running again cannot fix (the task's module does not import): no retry.
    no_retry: bool = False
    #: A reschedule-mode sensor's poke said "not yet": it pokes again then, in the same try.
    reschedule_at: datetime | None = None
    #: A soft-fail sensor passed its timeout: the task is skipped.
    skipped: bool = False
    #: The reporting worker keeps the slot this attempt frees for its successor's hand-off
    #: (``schedd_store.handoffs``): claim it in the same transaction, if it holds.
    hand_off: bool = False
