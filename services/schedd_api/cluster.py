"""Cluster status for users: who leads the schedulers and which replicas stand by."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from schedd_coord.client import EtcdClient
from schedd_coord.election import Election, LeaderInfo
from schedd_core.errors import FailedPrecondition
from schedd_store.database import Engine
from schedd_store.fence import read_fence


@dataclass(frozen=True)
class LeaderStatus:
    leader: LeaderInfo | None
    fence_token: int
    standbys: list[LeaderInfo]


async def leader_status(engine: Engine, etcd: EtcdClient | None) -> LeaderStatus:
    """The current leader (None during an election), the fence's token, and the standbys.

    A key of the election that holds a value no scheduler writes (written by hand, or forged) is
    MalformedLeaderKey, FAILED_PRECONDITION naming the key; etcd out of reach is UNAVAILABLE.
    """
    if etcd is None:
        raise FailedPrecondition("this api was started without etcd endpoints (SCHEDD_ETCD_ENDPOINTS)")
    election = Election(etcd, identity="api")
    leader = await election.leader()
    members = await election.members()
    fence_token, _ = await read_fence(engine)
    standbys = [m for m in members if leader is None or m.identity != leader.identity]
    return LeaderStatus(leader=leader, fence_token=fence_token, standbys=standbys)


def release() -> str:
    """The installed schedd release."""
    try:
        return importlib.metadata.version("schedd")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
