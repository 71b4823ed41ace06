"""Label values with a bounded number of distinct values, so a metric's series stay few however
many DAGs there are."""

from __future__ import annotations

import threading

#: The value reported for every value past the bound.
OTHER = "_other"


class BoundedLabel:
    """Passes the first ``limit`` distinct values it is asked about through unchanged and maps every
    later new one to :data:`OTHER`; a value once passed stays passed for the process's life."""

    def __init__(self, limit: int = 100) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        with self._lock:
            if value in self._seen or len(self._seen) < self._limit:
                self._seen.add(value)
                return value
        return OTHER
