"""The worker's liveness key in etcd: ``/schedd/workers/{id}`` under a kept lease.

When the worker dies its lease ends, etcd deletes the key, and the leading scheduler
fails its attempts over as soon as the worker has also been unheard by its registry for
its fence window. While the key exists, the worker's permit (``schedd_core.permits``)
lets it keep running attempts although its registry does not answer (up to the silence
cap); the key counts only once it is written, and stops counting at the lease's own
fail-stop deadline, before etcd can expire it. A lost lease alone stops nothing while
the registry still acknowledges heartbeats: a restart of etcd neither kills nor re-runs
a task. The worker then takes a new lease once etcd answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from schedd_coord.client import EtcdClient
from schedd_coord.credentials import EtcdAuth
from schedd_coord.errors import CoordinationError, EtcdAuthFailed
from schedd_coord.lease import KeptLease, LeaseTiming
from schedd_coord.members import announce_worker
from schedd_core.backoff import Backoff
from schedd_core.permits import Permit

log = logging.getLogger(__name__)


def _deadline_of(lease: KeptLease) -> Callable[[], float]:
    def until() -> float:
        return lease.deadline.until

    return until


def liveness_timing(ttl: int) -> LeaseTiming:
    """The lease timing of a worker with liveness TTL ``ttl`` seconds: a keep-alive every quarter
    of it (1.25 s with the default 5 s), valid for two thirds of it. A keep-alive answered late or
    lost only ends the key's validity; a worker whose registry still acknowledges its heartbeats
    stops nothing (see the module's docstring), so the period is chosen for an idle worker's
    wake-ups, leaving room for three attempts after a broken stream."""
    return LeaseTiming(ttl=ttl, renew_deadline=ttl * 2 / 3, retry_period=ttl / 4)


async def check_credentials(endpoints: str, auth: EtcdAuth | None) -> None:
    """Raise EtcdAuthFailed when etcd refuses the worker's user; an unreachable etcd only warns
    (the worker runs on registry acknowledgements until it answers)."""
    client = EtcdClient(endpoints, auth=auth)
    try:
        await client.ping()
    except EtcdAuthFailed:
        raise
    except CoordinationError as exc:
        log.warning("etcd: %s; no liveness lease until it answers", exc)
    finally:
        await client.close()


async def keep_liveness(
    endpoints: str,
    worker_id: str,
    incarnation: str,
    timing: LeaseTiming,
    permit: Permit,
    on_change: Callable[[], None],
    *,
    auth: EtcdAuth | None = None,
) -> None:
    """Hold the liveness key until cancelled, telling ``permit`` whether a lease backs it.
    ``auth``: the etcd user (``SCHEDD_ETCD_*`` when None)."""
    client = EtcdClient(endpoints, auth=auth)
    backoff = Backoff(0.2, 5.0)
    try:
        while True:
            lease = KeptLease(endpoints, timing, auth=auth)
            try:
                await lease.start()
                await announce_worker(client, worker_id, incarnation, lease.lease_id)
                permit.lease_held(_deadline_of(lease))
                on_change()
                backoff.reset()
                await lease.lost.wait()
                log.warning("the worker's etcd lease was lost; running on registry acknowledgements alone")
            except CoordinationError as exc:
                log.warning("liveness lease: %s; retrying in %.1fs", exc, backoff.delay)
            except asyncio.CancelledError:
                # The worker is leaving in order: give the key up now rather than one TTL later.
                permit.lease_lost()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(lease.stop(revoke=True), 2.0)
                raise
            finally:
                permit.lease_lost()
                on_change()
                with contextlib.suppress(Exception):
                    await lease.stop(revoke=False)
            await asyncio.sleep(backoff.take())
    finally:
        await client.close()
