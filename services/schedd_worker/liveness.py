"""The worker's liveness key in etcd: ``/schedd/workers/{id}`` under a kept lease.

When the worker dies its lease ends and the leading scheduler fails over its
attempts at once. When the worker loses its lease while alive (cut off from
etcd), it must assume its attempts are being failed over, so it abandons them
(fail-stop) and takes a new lease once etcd answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from schedd_coord.client import EtcdClient
from schedd_coord.errors import CoordinationError
from schedd_coord.lease import KeptLease, LeaseTiming
from schedd_coord.members import announce_worker

log = logging.getLogger(__name__)


async def keep_liveness(
    endpoints: str, worker_id: str, incarnation: str, ttl: int, on_lost: Callable[[str], None]
) -> None:
    """Hold the liveness key until cancelled; call ``on_lost`` whenever the lease is lost."""
    timing = LeaseTiming(ttl=ttl, renew_deadline=ttl * 2 / 3, retry_period=ttl / 6)
    client = EtcdClient(endpoints)
    delay = 0.2
    try:
        while True:
            lease = KeptLease(client, timing)
            try:
                await lease.start()
                await announce_worker(client, worker_id, incarnation, lease.lease_id)
                delay = 0.2
                await lease.lost.wait()
                on_lost("the worker's etcd lease was lost")
            except CoordinationError as exc:
                log.warning("liveness lease: %s; retrying in %.1fs", exc, delay)
            except asyncio.CancelledError:
                # The worker is leaving in order: give the key up now rather than one TTL later.
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(lease.stop(revoke=True), 2.0)
                raise
            finally:
                with contextlib.suppress(Exception):
                    await lease.stop(revoke=False)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    finally:
        await client.close()
