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
