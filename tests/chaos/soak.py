"""``make soak``: a random mix of faults against a steady load, then every invariant checked.

A cluster of two schedulers, two registries and three workers (each worker knows both
registries) runs on a durable PostgreSQL and an etcd of its own. A marked diamond DAG is
triggered every second while, every few seconds, one fault from the mix is injected and later
healed: leader kill -9, SIGTERM, SIGSTOP past the TTL, frozen while holding the fence lock; a
worker killed or frozen; a registry killed; etcd restarted; PostgreSQL restarted (fast, or
kill -9). At the end the load stops, every run must settle, and the invariants of
``tests.chaos.invariants`` are checked. Bounded in time; the seed is printed first so a failing
run can be replayed with ``--seed``. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from schedd_devstack import LocalEtcd, LocalPostgres
from schedd_devstack.faults import arm
from schedd_devstack.services import Cluster, ServiceProcess
from tests.chaos.invariants import FenceWatch, check_all, marked_dag, wait_settled
from tests.fixtures.services import schedctl

DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
FAST = {
    "SCHEDD_LEASE_TTL": "2",
    "SCHEDD_RENEW_DEADLINE": "1.4",
    "SCHEDD_HEARTBEAT_INTERVAL": "0.5",
    "SCHEDD_WORKER_LEASE_TTL": "2",
    "SCHEDD_ZOMBIE_THRESHOLD": "6",
}


class Soak:
    def __init__(self, rng: random.Random, base: Path) -> None:
        self.rng = rng
        self.base = base
        self.faults_dir = base / "faults"
        self.marks = base / "marks"
        self.marks.mkdir()
        self.pg = LocalPostgres()
        self.etcd = LocalEtcd()
        self.cluster: Cluster | None = None
        self.runs: list[str] = []
        self.log: list[str] = []

    def start(self) -> Cluster:
        self.pg.start(self.base / "pg", durable=True)
        self.etcd.start(self.base / "etcd", durable=False)
        cluster = Cluster(
            self.pg.url,
            self.etcd.endpoint,
            self.base / "logs",
            schedulers=2,
            workers=0,
            registries=2,
            service_env=FAST,
            scheduler_env={"SCHEDD_FAULTS": str(self.faults_dir)},
        )
        cluster.start()
        registries = ",".join(cluster.registries)
        for i in range(3):
            cluster.add_worker(f"w{i}", env={"SCHEDD_REGISTRY": registries})
        path = self.base / "dag.yaml"
        path.write_text(yaml.safe_dump(marked_dag("soak", DIAMOND, self.marks, 0.3), sort_keys=False))
        result = schedctl(cluster.api_address, "dags", "register", str(path))
        assert result.returncode == 0, result.stderr
        self.cluster = cluster
        return cluster

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        self.etcd.stop()
        self.pg.stop()

    def trigger(self) -> None:
        assert self.cluster is not None
        run_id = f"r{len(self.runs)}"
        result = schedctl(self.cluster.api_address, "runs", "trigger", "soak", "--run-id", run_id, timeout=30)
        if result.returncode == 0:
            self.runs.append(run_id)  # acknowledged: it must exist and succeed

    def faults(self) -> list[Callable[[], None]]:
        return [
            self.leader_kill,
            self.leader_sigterm,
            self.leader_pause,
            self.leader_frozen_in_fence,
            self.worker_kill,
            self.worker_pause,
            self.registry_kill,
            self.etcd_restart,
            self.postgres_restart,
            self.postgres_kill,
        ]

    # -- the faults -----------------------------------------------------------------------------

    def _leader(self) -> ServiceProcess | None:
        assert self.cluster is not None
        return self.cluster.leader()

    def _restart(self, proc: ServiceProcess, after: float) -> None:
        self.settle(after)
        if not proc.alive:
            proc.start()

    def leader_kill(self) -> None:
        leader = self._leader()
        if leader is not None:
            leader.kill()
            self._restart(leader, 3)

    def leader_sigterm(self) -> None:
        leader = self._leader()
        if leader is not None:
            leader.terminate()
            self._restart(leader, 1)

    def leader_pause(self) -> None:
        leader = self._leader()
        if leader is not None:
            leader.pause()
            self.settle(4)
            leader.resume()

    def leader_frozen_in_fence(self) -> None:
        hit = arm(self.faults_dir, "fence.locked", "stop")
        deadline = time.monotonic() + 10
        while not hit.exists() and time.monotonic() < deadline:
            self.settle(0.2)
        assert self.cluster is not None
        if hit.exists():
            pid = int(hit.read_text())
            hit.unlink()
            proc = next(p for p in self.cluster.schedulers.values() if p.pid == pid)
            self.settle(4)
            proc.resume()

    def _worker(self) -> ServiceProcess:
        assert self.cluster is not None
        return self.rng.choice([p for p in self.cluster.workers.values() if p.alive])

    def worker_kill(self) -> None:
        worker = self._worker()
        worker.kill()
        self._restart(worker, 2)

    def worker_pause(self) -> None:
        worker = self._worker()
        worker.pause()
        self.settle(8)
        worker.resume()

    def registry_kill(self) -> None:
        assert self.cluster is not None
        registry = self.rng.choice(list(self.cluster.registries.values()))
        registry.kill()
        self._restart(registry, 2)

    def etcd_restart(self) -> None:
        self.etcd.stop()
        self.settle(self.rng.uniform(1, 5))
        self.etcd.start(self.etcd.base_dir, durable=False)

    def postgres_restart(self) -> None:
        self.pg.stop()
        self.pg.start(self.pg.base_dir, durable=True)

    def postgres_kill(self) -> None:
        self.pg.kill()
        self.pg.start(self.pg.base_dir, durable=True)

    # -- the load -------------------------------------------------------------------------------

    def settle(self, seconds: float) -> None:
        """Keep the load going for ``seconds``: a run a second."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.monotonic()
            self.trigger()
            time.sleep(max(0.0, min(1.0 - (time.monotonic() - began), end - time.monotonic())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--minutes", type=float, default=5.0)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"soak: seed {seed}, {args.minutes:g} minutes (replay with --seed {seed})", flush=True)
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="schedd-soak-"))
    soak = Soak(rng, base)
    try:
        cluster = soak.start()
        end = time.monotonic() + args.minutes * 60
        with FenceWatch(cluster):
            while time.monotonic() < end:
                soak.settle(rng.uniform(2, 6))
                fault = rng.choice(soak.faults())
                print(f"  {time.strftime('%H:%M:%S')} {fault.__name__}", flush=True)
                fault()
            wait_settled(cluster, "soak", soak.runs, 180)
        check_all(cluster, soak.marks, DIAMOND)
        print(f"soak: {len(soak.runs)} runs, every invariant held (seed {seed})")
    except BaseException:
        print(f"soak FAILED with seed {seed}; logs in {base / 'logs'}")
        soak.stop()
        raise
    soak.stop()
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
