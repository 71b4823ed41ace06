"""The schedulers of a :class:`schedd_devstack.services.Cluster` and their election in etcd.

Replicas are started, stopped and killed one at a time; who leads is read from the fence
(``scheduler_fence``, the database's view) or from etcd's leader key. A wait for a leader fails at
once when a scheduler exits on its own, except one that exited because its ``/metrics`` port was
taken before it bound it: that one is started again on a new port (up to ``BIND_ATTEMPTS`` times).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Mapping

from schedd_coord import access
from schedd_coord.client import EtcdClient
from schedd_coord.election import LEADER_KEY, MEMBERS_PREFIX, LeaderInfo
from schedd_devstack._process import run_coroutine_sync
from schedd_devstack.cluster_base import BIND_ATTEMPTS, POLL_SECONDS, ClusterBase
from schedd_devstack.process import ClusterError, ServiceProcess


class SchedulersMixin(ClusterBase):
    """Scheduler replicas, the fence and the election keys."""

    def leader(self) -> ServiceProcess | None:
        """The alive scheduler of this cluster that raised the fence last, if any.

        A paused or partitioned leader stays "the leader" here until another one raises the fence.
        """
        _, holder = self.fence()
        proc = self.schedulers.get(holder)
        return proc if proc is not None and proc.alive else None

    def add_scheduler(
        self, *, etcd_endpoints: str | None = None, env: Mapping[str, str] | None = None, user: str = ""
    ) -> ServiceProcess:
        """Start one more scheduler replica (identity ``scheduler-N-TAG``); it campaigns at once.
        Does not wait: with a leader in place it stays a standby. ``etcd_endpoints`` overrides the
        cluster's (e.g. a proxy that a partition test can cut); ``env`` adds settings for this
        replica only (``SCHEDD_EXECUTOR``...); ``user`` runs it as that user, as for ``add_worker``."""
        self._require_running()
        return self._spawn_scheduler(etcd_endpoints, env=env, user=user)

    def scheduler_is_leader(self, identity: str) -> bool | None:
        """What the replica's own ``schedd_scheduler_is_leader`` metric says; None when unreachable."""
        url = f"http://{self.scheduler_metrics[identity]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                text = resp.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("schedd_scheduler_is_leader "):
                return float(line.split()[1]) == 1.0
        return None

    def stop_scheduler(self, identity: str, timeout: float | None = None) -> int | None:
        """Graceful stop: a leader finishes its pass and resigns, so a standby takes over at once."""
        return self._scheduler(identity).terminate(timeout)

    def kill_scheduler(self, identity: str) -> int | None:
        """SIGKILL a scheduler: its leader key stays until the lease expires."""
        return self._scheduler(identity).kill()

    def wait_for_leader(self, above: int = 0, timeout: float = 30.0) -> tuple[int, ServiceProcess]:
        """Wait until one of our alive schedulers raised the fence above ``above``; ``(token, it)``."""
        return self._wait_leader(above, time.monotonic() + timeout)

    def release_election(self) -> bool:
        """Delete the election keys this cluster's dead schedulers left in etcd (the leader key,
        if one of them holds it, and their member keys) instead of waiting for their leases to
        expire. Returns whether the leader key was deleted. Live schedulers' keys are left alone.
        """
        dead = {identity for identity, proc in self.schedulers.items() if not proc.alive}

        async def release() -> bool:
            client = EtcdClient(self.etcd_endpoints, auth=self._etcd_root())
            try:
                for identity in dead:
                    await client.delete(MEMBERS_PREFIX + identity.encode())
                kv = await client.get(LEADER_KEY)
                if kv is None or LeaderInfo.from_kv(kv).identity not in dead:
                    return False
                return await client.delete_if_created_at(LEADER_KEY, kv.create_revision)
            finally:
                await client.close()

        return run_coroutine_sync(release)

    def current_leader_key(self) -> LeaderInfo | None:
        """What etcd's leader key says right now (None when nobody leads)."""

        async def get() -> LeaderInfo | None:
            client = EtcdClient(self.etcd_endpoints, auth=self._etcd_root())
            try:
                kv = await client.get(LEADER_KEY)
                return LeaderInfo.from_kv(kv) if kv is not None else None
            finally:
                await client.close()

        return run_coroutine_sync(get)

    # -- internals ----------------------------------------------------------------------------------

    def _spawn_scheduler(
        self, etcd_endpoints: str | None = None, *, env: Mapping[str, str] | None = None, user: str = ""
    ) -> ServiceProcess:
        self._scheduler_seq += 1
        identity = f"scheduler-{self._scheduler_seq}-{self.tag}"
        name = f"scheduler-{self._scheduler_seq}"
        proc = self._process(
            name,
            "schedd_scheduler.main",
            {
                "SCHEDD_DATABASE_URL": self.database_url,
                "SCHEDD_ETCD_ENDPOINTS": etcd_endpoints or self.etcd_endpoints,
                **self._etcd_user(access.SCHEDULER_USER),
                "SCHEDD_SCHEDULER_ID": identity,
                "SCHEDD_METRICS_LISTEN": self._metrics_address(name),
            },
            kind="scheduler",
            extra_env=env,
            user=user,
        )
        self.schedulers[identity] = proc
        self.scheduler_metrics[identity] = self.metrics[name]
        proc.start()
        return proc

    def _restart_schedulers_that_lost_a_port(self, restarts: dict[str, int]) -> None:
        """Start again, on a new ``/metrics`` port, every scheduler that exited because its port was
        taken (``restarts`` counts them by identity); raise for any other that exited on its own."""
        dead = {i: p for i, p in self.schedulers.items() if not p.alive and not p.stopped}
        failed = [
            p for i, p in dead.items() if not (p.lost_its_port() and restarts.get(i, 0) < BIND_ATTEMPTS)
        ]
        if failed:
            raise ClusterError(
                "\n\n".join(p.describe_failure(f"{p.name} exited while waiting for a leader") for p in failed)
            )
        for identity, proc in dead.items():
            restarts[identity] = restarts.get(identity, 0) + 1
            self.schedulers[identity] = self._restart_on_new_metrics_port(proc)
            self.scheduler_metrics[identity] = self.metrics[proc.name]

    def _wait_no_foreign_leader(self, deadline: float) -> None:
        """Wait for a leader key left by someone else to go away (its lease expiring)."""
        while True:
            info = self.current_leader_key()
            if info is None:
                return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"another scheduler ({info.identity!r}, token {info.token}) leads on etcd "
                    f"{self.etcd_endpoints}; stop it before starting a cluster there"
                )
            time.sleep(0.1)

    def _wait_leader(self, above: int, deadline: float) -> tuple[int, ServiceProcess]:
        restarts: dict[str, int] = {}
        while True:
            self._restart_schedulers_that_lost_a_port(restarts)
            token, holder = self.fence()
            proc = self.schedulers.get(holder)
            if token > above and proc is not None and proc.alive:
                return token, proc
            if time.monotonic() >= deadline:
                alive = [p for p in self.schedulers.values() if p.alive]
                details = "\n\n".join(p.describe_failure("log") for p in alive) or "no scheduler is alive"
                raise ClusterError(
                    f"no scheduler raised the fence above {above} in time (fence: token {token}, "
                    f"holder {holder!r}):\n{details}"
                )
            time.sleep(POLL_SECONDS * 2)
