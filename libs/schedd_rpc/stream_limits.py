"""Caps on the long-lived server streams a service holds open (the api's ``WatchRun`` and
``WatchTaskLogs``): so many per principal, so many in total.

A stream takes a slot when it is admitted (after authentication, before its handler runs) and gives
it back when it ends, however it ends. A stream over either cap is refused with RESOURCE_EXHAUSTED
and a message naming the cap and its setting; it never reaches its handler. The principal is the
token's name (``anonymous`` for every caller with authentication disabled, so one cap then covers
them all).

Not guaranteed: fairness between principals under the total cap (the first come take the slots),
nor any cap across api replicas: each process counts its own streams.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from schedd_core.errors import InvalidArgument

PER_PRINCIPAL_ENV = "SCHEDD_API_MAX_WATCHES_PER_PRINCIPAL"
IN_TOTAL_ENV = "SCHEDD_API_MAX_WATCHES"
DEFAULT_PER_PRINCIPAL = 32
DEFAULT_IN_TOTAL = 1000

#: The server streams of the api the caps apply to.
WATCH_METHODS = frozenset({"/schedd.v1.RunService/WatchRun", "/schedd.v1.RunService/WatchTaskLogs"})


class OverCap(Exception):
    """A stream over a cap; the message names the cap and its setting."""


@dataclass(frozen=True)
class StreamCaps:
    per_principal: int = DEFAULT_PER_PRINCIPAL
    in_total: int = DEFAULT_IN_TOTAL

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StreamCaps:
        """The caps set by :data:`PER_PRINCIPAL_ENV` and :data:`IN_TOTAL_ENV` (the defaults where
        unset); InvalidArgument naming the variable unless each is a positive whole number."""
        return cls(
            per_principal=_positive(env, PER_PRINCIPAL_ENV, DEFAULT_PER_PRINCIPAL),
            in_total=_positive(env, IN_TOTAL_ENV, DEFAULT_IN_TOTAL),
        )


class StreamLimits:
    """The open streams of :data:`WATCH_METHODS` (or ``methods``) by principal, checked against
    ``caps``; ``registry`` gets the gauge ``schedd_api_watch_streams`` (streams open)."""

    def __init__(
        self,
        caps: StreamCaps,
        *,
        methods: frozenset[str] = WATCH_METHODS,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.caps = caps
        self.methods = methods
        self._open: Counter[str] = Counter()
        self._total = 0
        self._gauge = Gauge(
            "schedd_api_watch_streams",
            "Watch streams open in this process (WatchRun, WatchTaskLogs).",
            registry=registry,
        )

    def take(self, principal: str) -> contextlib.AbstractContextManager[object]:
        """A slot for one stream of ``principal``, given back when the returned context exits;
        OverCap (nothing taken) when a cap is reached. Enter the result at once."""
        if self._open[principal] >= self.caps.per_principal:
            raise OverCap(
                f"too many watch streams: {principal!r} has {self._open[principal]} open, at most "
                f"{self.caps.per_principal} streams per principal ({PER_PRINCIPAL_ENV}); close one first"
            )
        if self._total >= self.caps.in_total:
            raise OverCap(
                f"too many watch streams: this api serves at most {self.caps.in_total} streams in total "
                f"({IN_TOTAL_ENV}); retry later"
            )
        self._open[principal] += 1
        self._total += 1
        self._gauge.set(self._total)
        release = contextlib.ExitStack()
        release.callback(self._release, principal)
        return release

    def _release(self, principal: str) -> None:
        self._open[principal] -= 1
        if not self._open[principal]:
            del self._open[principal]
        self._total -= 1
        self._gauge.set(self._total)


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(name, f"must be a whole number, not {raw!r}") from None
    if value < 1:
        raise InvalidArgument(name, f"must be at least 1, not {value}")
    return value
