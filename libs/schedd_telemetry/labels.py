"""Label values with a bounded number of distinct values, so a metric's series stay few however
many DAGs there are."""

from __future__ import annotations

import threading
from typing import Any

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


class LabelledChildren:
    """The children of one labelled metric, each looked up from the metric once.

    prometheus_client's ``labels()`` checks its arguments and takes a lock on every call (about
    2 microseconds); a path that counts every task asks this instead (a dictionary lookup). It keeps
    a child for each distinct tuple of label values it is given, so the caller bounds those values
    (a :class:`BoundedLabel`, a fixed set of states). Use it from one thread; the children it
    returns are prometheus_client's, safe to change from any thread.
    """

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        """The child for ``values``, given in the order of the metric's label names."""
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child
