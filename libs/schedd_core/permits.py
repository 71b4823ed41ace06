"""How long a worker may keep running attempts unheard: the rule shared by workers and the leader.

The registry grants every worker an :class:`AttemptWindows` (sent in the Welcome, stored with the
worker's row). The worker keeps a :class:`Permit`: it may keep running its attempts until

    min(max(lease_until, ack_until), cap)

- ``ack_until = sent + ack_window`` for the newest heartbeat its registry acknowledged (an ack is
  sent only once the heartbeat is stored, so the stored heartbeat is no older than ``sent``);
- ``lease_until`` is its etcd liveness lease's fail-stop deadline (``schedd_coord.lease``), counted
  only once the liveness key of that lease has been written;
- ``cap = sent + silence_limit - kill_grace - FENCE_MARGIN``: even a live lease does not keep
  attempts running past that.

It starts a new attempt only while ``ack_until`` has not passed (its registry heard it lately).
When the permit lapses it stops every attempt: SIGTERM at once, SIGKILL ``kill_grace`` later, the
SIGKILL enforced by a separate reaper process even if the worker is frozen.

The leader fails an attempt over only when its worker has not been heard (stored heartbeat, or the
claim if later) for longer than ``silence_limit``, or, while the worker holds no liveness key in
etcd, for longer than ``fence_window = ack_window + kill_grace + FENCE_MARGIN``. A missing key means
etcd expired the lease, which happens at least the lease's margin (validated to exceed the kill
grace) after ``lease_until``. So in either case every process of the attempt was killed before the
attempt is failed over, provided the clocks of the worker and of PostgreSQL run at the same rate
within ``FENCE_MARGIN`` over one window. What is not covered: a task that escapes its process
group (``setsid``) and so outlives the SIGKILL of the group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from schedd_core.clock import Clock

#: Seconds added to every window for clock-rate differences and message latency.
FENCE_MARGIN = 0.5

#: Seconds between the heartbeats of a worker that holds no attempt, unless the silence limit is short.
IDLE_HEARTBEAT_INTERVAL = 10.0

_NEVER = float("-inf")


@dataclass(frozen=True)
class AttemptWindows:
    """The timing a registry grants its workers, in seconds.

    ``0 < heartbeat_interval < ack_window``, ``ack_window + FENCE_MARGIN < silence_limit`` and
    ``heartbeat_interval <= idle_heartbeat_interval <= max(heartbeat_interval, silence_limit / 2)``:
    a worker that holds no attempt heartbeats every ``idle_heartbeat_interval``
    (``schedd_worker.heartbeats``), twice within the silence limit, so its row never looks
    abandoned to a second incarnation.
    """

    heartbeat_interval: float = 1.0
    ack_window: float = 3.0
    silence_limit: float = 30.0
    #: 0: the default for the other three (:meth:`idle_interval_for`).
    idle_heartbeat_interval: float = 0.0

    def __post_init__(self) -> None:
        if self.idle_heartbeat_interval == 0:
            idle = self.idle_interval_for(self.heartbeat_interval, self.silence_limit)
            object.__setattr__(self, "idle_heartbeat_interval", idle)
        if not 0 < self.heartbeat_interval < self.ack_window:
            raise ValueError(
                f"the ack window ({self.ack_window:g}s) must be longer than the heartbeat interval "
                f"({self.heartbeat_interval:g}s), which must be positive"
            )
        longest = max(self.heartbeat_interval, self.silence_limit / 2)
        if not self.heartbeat_interval <= self.idle_heartbeat_interval <= longest:
            raise ValueError(
                f"the idle heartbeat interval ({self.idle_heartbeat_interval:g}s) must be at least the "
                f"heartbeat interval ({self.heartbeat_interval:g}s) and at most half the silence limit "
                f"({self.silence_limit:g}s) where that is longer"
            )
        if self.ack_window + FENCE_MARGIN >= self.silence_limit:
            raise ValueError(
                f"the silence limit ({self.silence_limit:g}s) must exceed the ack window "
                f"({self.ack_window:g}s) by more than {FENCE_MARGIN:g}s"
            )

    @classmethod
    def for_silence_limit(cls, silence_limit: float) -> AttemptWindows:
        """Windows for a silence limit: heartbeats every second (more often below 10 s), an ack window
        of three heartbeat intervals, idle heartbeats as :meth:`idle_interval_for` says."""
        interval = min(1.0, silence_limit / 10)
        return cls(heartbeat_interval=interval, ack_window=3 * interval, silence_limit=silence_limit)

    @staticmethod
    def idle_interval_for(heartbeat_interval: float, silence_limit: float) -> float:
        """The default idle heartbeat interval: 10 s, a third of the silence limit if that is shorter,
        never shorter than the heartbeat interval."""
        return max(heartbeat_interval, min(IDLE_HEARTBEAT_INTERVAL, silence_limit / 3))

    def silent_after(self, idle: bool) -> float:
        """Seconds without a stored heartbeat after which a worker is taken to be cut off or frozen (its
        registry claims nothing for it): its ack window, plus the idle interval while it holds nothing
        (its heartbeats are that far apart)."""
        return self.ack_window + (self.idle_heartbeat_interval if idle else 0.0)

    def check_kill_grace(self, kill_grace: float) -> None:
        """Raise ValueError unless a worker with this kill grace can keep the windows."""
        if kill_grace < 0:
            raise ValueError("the kill grace must not be negative")
        if self.ack_window + kill_grace + FENCE_MARGIN >= self.silence_limit:
            raise ValueError(
                f"a kill grace of {kill_grace:g}s does not fit: ack window ({self.ack_window:g}s) + kill "
                f"grace + {FENCE_MARGIN:g}s must stay below the silence limit ({self.silence_limit:g}s)"
            )

    def fence_window(self, kill_grace: float) -> float:
        """Seconds unheard after which a worker without a liveness lease has stopped every attempt."""
        return self.ack_window + kill_grace + FENCE_MARGIN


class Permit:
    """A worker's permission to run attempts, from what confirmed that it is still heard.

    Pure bookkeeping on an injected clock; the worker asks :meth:`until` and acts on it.
    """

    def __init__(self, windows: AttemptWindows, kill_grace: float, clock: Clock) -> None:
        windows.check_kill_grace(kill_grace)
        self._windows = windows
        self.kill_grace = kill_grace
        self._clock = clock
        self._sent: dict[int, float] = {}
        self._acked_sent = _NEVER
        self._lease_until: Callable[[], float] | None = None

    @property
    def windows(self) -> AttemptWindows:
        return self._windows

    def granted(self, windows: AttemptWindows) -> None:
        """A registry granted (possibly new) windows; they apply from now on."""
        windows.check_kill_grace(self.kill_grace)
        self._windows = windows

    def sent(self, sequence: int) -> None:
        """A heartbeat (or the hello, sequence 0 of a stream) was sent now."""
        self._sent[sequence] = self._clock.monotonic()

    def acknowledged(self, sequence: int) -> None:
        """The registry stored the heartbeat ``sequence`` (a Welcome acknowledges the hello)."""
        sent = self._sent.pop(sequence, None)
        if sent is not None:
            self._acked_sent = max(self._acked_sent, sent)
        for older in [s for s in self._sent if s < sequence]:
            del self._sent[older]

    def lease_held(self, until: Callable[[], float]) -> None:
        """The etcd liveness lease whose key is written; ``until()`` is its current fail-stop
        deadline (monotonic), which moves on with every acknowledged keep-alive."""
        self._lease_until = until

    def lease_lost(self) -> None:
        self._lease_until = None

    @property
    def ack_until(self) -> float:
        return self._acked_sent + self._windows.ack_window

    def until(self) -> float:
        """The monotonic time at which running attempts must be stopped."""
        lease = _NEVER if self._lease_until is None else self._lease_until()
        cap = self._acked_sent + self._windows.silence_limit - self.kill_grace - FENCE_MARGIN
        return min(max(lease, self.ack_until), cap)

    def may_start(self) -> bool:
        """Whether a new attempt may start now: the registry heard this worker lately."""
        return self._clock.monotonic() < min(self.ack_until, self.until())

    def may_run(self) -> bool:
        return self._clock.monotonic() < self.until()
