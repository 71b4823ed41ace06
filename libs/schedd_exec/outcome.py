"""What running one attempt produced."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    exit_code: int
    error: str
    started_at: datetime
    ended_at: datetime
    #: JSON of the value a Python task returned; "" for none.
    result_json: str = ""
    #: The attempt was stopped before it finished (cancelled, drained, lease lost): run it again.
    abandoned: bool = False
    #: A failure that running again cannot fix (the task's module does not import): no retries.
    no_retry: bool = False
    #: A reschedule-mode sensor's poke said "not yet" (``succeeded`` is True: the poke ran): it pokes
    #: again at this time, in the same try.
    reschedule_at: datetime | None = None
    #: A soft-fail sensor passed its timeout (``succeeded`` is False): the task is skipped.
    skipped: bool = False
    #: How the attempt failed, for the end of its log, when ``error`` says more than the log needs
    #: (a shell command's error repeats the tail of its output); empty: ``error``.
    log_note: str = ""
