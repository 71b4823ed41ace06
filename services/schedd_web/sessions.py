"""Signed-in users' sessions, kept in this process's memory.

A session is found by a random id (256 bits) that only the browser's HttpOnly cookie carries; it
holds the user's api token, the role the api gave that token at sign-in, and the CSRF token every
change request of the session must carry. The token never leaves the server: pages and scripts
never see it.

Guaranteed: a session unused for ``idle_seconds`` or older than ``max_age_seconds`` is gone (the
next request with its id finds nothing), signing out forgets it at once, and at most
``max_sessions`` exist (the least recently used one is forgotten to make room). Not guaranteed:
sessions survive a restart of the process, or are known to another replica; with several replicas
a load balancer must send a browser back to the replica that signed it in (sticky on the cookie),
or the user signs in again. The api checks the token on every call, so a token revoked after
sign-in stops working at once whatever the session says.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: Roles in order of strength; the UI offers what the role may do (the api decides).
ROLES = ("viewer", "operator", "admin")


@dataclass
class Session:
    id: str
    token: str
    role: str
    #: who the api says the token is (its name), or its public id when the api did not say
    principal: str
    csrf: str
    created: float
    last_seen: float

    @property
    def can_operate(self) -> bool:
        """Whether the role may trigger, clear, mark, cancel and pause (operator or admin)."""
        return self.role in ("operator", "admin")

    def csrf_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(self.csrf.encode(), candidate.encode())


class SessionStore:
    def __init__(
        self,
        *,
        idle_seconds: float,
        max_age_seconds: float,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_seconds = idle_seconds
        self.max_age_seconds = max_age_seconds
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, token: str, role: str, principal: str) -> Session:
        """A new session with fresh random ids; the least recently used one goes when full."""
        self.purge()
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        now = self._clock()
        session = Session(
            id=secrets.token_urlsafe(32),
            token=token,
            role=role,
            principal=principal,
            csrf=secrets.token_urlsafe(32),
            created=now,
            last_seen=now,
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session | None:
        """The live session with this id (its idle time starts over), or None."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if self._expired(session, now):
            del self._sessions[session_id]
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        return session

    def delete(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def purge(self) -> None:
        """Forget every expired session."""
        now = self._clock()
        for session_id in [s.id for s in self._sessions.values() if self._expired(s, now)]:
            del self._sessions[session_id]

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle_seconds or now - session.created > self.max_age_seconds
