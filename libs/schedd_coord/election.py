"""Leader election on etcd with fencing tokens.

Every candidate holds a :class:`KeptLease` and tries, in one transaction, to
create the leader key bound to that lease if the key is absent. The winner's
**token** is the key's create revision: etcd revisions only grow, so each term's
token is larger than every earlier term's. Losers watch the key and try again
when it is deleted (resignation, or lease expiry).

Guaranteed: at most one key exists at a time, so at most one candidate holds a
token whose key is live. Not guaranteed: that a deposed leader *knows* it is
deposed right away (a paused process learns late). Leaders must therefore
check their lease's validity (fail-stop) and stamp their writes with the token
(fencing in PostgreSQL).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from schedd_coord.client import EtcdClient, KeyValue
from schedd_coord.errors import MalformedLeaderKey

LEADER_KEY = b"/schedd/scheduler/leader"
MEMBERS_PREFIX = b"/schedd/scheduler/members/"


@dataclass(frozen=True)
class LeaderInfo:
    identity: str
    token: int
    since: str
    address: str

    @staticmethod
    def from_kv(kv: KeyValue) -> LeaderInfo:
        """Read what a candidate wrote: a JSON object whose ``identity``, ``since`` and ``address``
        are strings (missing ones are ``""``). Raises MalformedLeaderKey naming the key otherwise."""
        try:
            data = json.loads(kv.value or b"{}")
        except (ValueError, UnicodeDecodeError):
            data = None
        fields = ("identity", "since", "address")
        if not isinstance(data, dict) or not all(isinstance(data.get(f, ""), str) for f in fields):
            what = "the leader key" if kv.key == LEADER_KEY else "the election key"
            raise MalformedLeaderKey(
                f"{what} holds a malformed value ({kv.key.decode(errors='replace')} is not a JSON object "
                "of identity, since and address strings); the value was not written by a scheduler"
            )
        return LeaderInfo(
            identity=data.get("identity", ""),
            token=kv.create_revision,
            since=data.get("since", ""),
            address=data.get("address", ""),
        )


class Election:
    def __init__(
        self,
        client: EtcdClient,
        *,
        identity: str,
        address: str = "",
        key: bytes = LEADER_KEY,
        members_prefix: bytes = MEMBERS_PREFIX,
    ) -> None:
        self._client = client
        self._key = key
        self._members_prefix = members_prefix
        self.identity = identity
        self.address = address
        #: Monotonic time this candidate last saw the leader key vanish; None if it never waited.
        self.vacancy_seen_at: float | None = None

    def _value(self, since: str) -> bytes:
        return json.dumps({"identity": self.identity, "since": since, "address": self.address}).encode()

    async def announce(self, lease_id: int, *, since: str) -> None:
        """Record this candidate as a replica, for as long as ``lease_id`` lives."""
        await self._client.put(
            self._members_prefix + self.identity.encode(), self._value(since), lease=lease_id
        )

    async def campaign(self, lease_id: int) -> int:
        """Wait until this candidate leads; returns the term's fencing token.

        Cancel the call to stop campaigning.
        """
        while True:
            value = self._value(datetime.now(UTC).isoformat())
            created, revision, current = await self._client.create_if_absent(self._key, value, lease=lease_id)
            if created:
                return revision
            if current is None:  # deleted between the compare and the read; try again
                continue
            await self._wait_deleted(current.mod_revision + 1)

    async def _wait_deleted(self, start_revision: int) -> None:
        async for events in self._client.watch(self._key, start_revision=start_revision):
            if any(kind == "delete" for kind, _ in events):
                self.vacancy_seen_at = time.monotonic()
                return

    async def resign(self, token: int) -> bool:
        """Delete the leader key if it is still this term's. Returns whether it was."""
        return await self._client.delete_if_created_at(self._key, token)

    async def leader(self) -> LeaderInfo | None:
        kv = await self._client.get(self._key)
        return LeaderInfo.from_kv(kv) if kv else None

    async def members(self) -> list[LeaderInfo]:
        """Every live replica, the leader included (``token`` is not meaningful here)."""
        return [LeaderInfo.from_kv(kv) for kv in await self._client.get_prefix(self._members_prefix)]
