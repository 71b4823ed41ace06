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
from dataclasses import dataclass

from schedd_coord.client import EtcdClient, KeyValue

LEADER_KEY = b"/schedd/scheduler/leader"


@dataclass(frozen=True)
class LeaderInfo:
    identity: str
    token: int
    since: str
    address: str

    @staticmethod
    def from_kv(kv: KeyValue) -> LeaderInfo:
        data = json.loads(kv.value or b"{}")
        return LeaderInfo(
            identity=data.get("identity", ""),
            token=kv.create_revision,
            since=data.get("since", ""),
            address=data.get("address", ""),
        )


class Election:
    def __init__(
        self, client: EtcdClient, *, identity: str, address: str = "", key: bytes = LEADER_KEY
    ) -> None:
        self._client = client
        self._key = key
        self.identity = identity
        self.address = address

    async def campaign(self, lease_id: int, *, since: str) -> int:
        """Wait until this candidate leads; returns the term's fencing token.

        Cancel the call to stop campaigning.
        """
        value = json.dumps({"identity": self.identity, "since": since, "address": self.address}).encode()
        while True:
            created, revision, current = await self._client.create_if_absent(self._key, value, lease=lease_id)
            if created:
                return revision
            if current is None:  # deleted between the compare and the read; try again
                continue
            await self._wait_deleted(current.mod_revision + 1)

    async def _wait_deleted(self, start_revision: int) -> None:
        async for events in self._client.watch(self._key, start_revision=start_revision):
            if any(kind == "delete" for kind, _ in events):
                return

    async def resign(self, token: int) -> bool:
        """Delete the leader key if it is still this term's. Returns whether it was."""
        return await self._client.delete_if_created_at(self._key, token)

    async def leader(self) -> LeaderInfo | None:
        kv = await self._client.get(self._key)
        return LeaderInfo.from_kv(kv) if kv else None
