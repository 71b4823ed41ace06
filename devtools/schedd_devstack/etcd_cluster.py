"""Run a private multi-member etcd cluster on one machine: one process per member.

:class:`LocalEtcdCluster` starts ``size`` members (default 3) that know each other from the start
(``--initial-cluster``), each with its data in ``base_dir/<member name>`` and its output in
``base_dir/<member name>.log``. Guarantees once :meth:`LocalEtcdCluster.start` returns:

* every member serves plain HTTP on 127.0.0.1, client and peer ports picked by ``ports``;
* every member has answered ``/health`` with ``"health": "true"``: the members elected a raft
  leader and each serves reads and writes;
* heartbeat and election timing are etcd's defaults (100 ms / 1000 ms), as in a deployment, so
  losing the raft leader costs an election of about a second.

:meth:`LocalEtcdCluster.kill` crashes one member (SIGKILL); the others keep a quorum while a
majority lives. :meth:`LocalEtcdCluster.raft_leader` says which member leads, as the members
themselves report it.

Not guaranteed: durability with ``durable=False`` (``--unsafe-no-fsync``); restarting a killed
member (not supported here: start a new cluster); that the ports stay free between the probe and
etcd's bind (a start that loses a port to another process is retried on new ports, at most three
times).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedd_devstack._process import (
    child_env,
    die_with_parent_prefix,
    kill_group,
    read_tail,
    register_running,
    stop_process,
    unregister_running,
)
from schedd_devstack.binaries import DevstackError, find_etcd
from schedd_devstack.etcd import _healthy, _supports_unsafe_no_fsync
from schedd_devstack.ports import LOCALHOST, free_port

__all__ = ["EtcdMember", "LocalEtcdCluster"]

_START_ATTEMPTS = 3
_BIND_FAILURE_MARKERS = ("address already in use",)


@dataclass
class EtcdMember:
    """One member: its name, ports and process (None before start and after stop or kill)."""

    name: str
    client_port: int
    peer_port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT``, as ``SCHEDD_ETCD_ENDPOINTS`` lists it."""
        return f"{LOCALHOST}:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.endpoint}"

    @property
    def peer_url(self) -> str:
        return f"http://{LOCALHOST}:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LocalEtcdCluster:
    """``size`` private etcd members; see the module docstring. Not thread-safe."""

    def __init__(self, size: int = 3, *, startup_timeout: float = 60.0, stop_timeout: float = 15.0) -> None:
        if size < 1:
            raise ValueError("an etcd cluster needs at least one member")
        self.size = size
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self.members: list[EtcdMember] = []

    @property
    def endpoints(self) -> str:
        """Every member's client address, comma-separated (the ``etcd_endpoints`` of a Cluster)."""
        return ",".join(m.endpoint for m in self.members)

    def start(self, base_dir: Path, *, durable: bool = True) -> None:
        """Start every member and wait (bounded by ``startup_timeout``) until each reports healthy.

        On failure or interruption every member started is stopped before the error propagates;
        a :class:`DevstackError` carries the log tails of the members.
        """
        if any(m.running for m in self.members):
            raise DevstackError("this etcd cluster is running already")
        binary = find_etcd()
        base_dir = Path(base_dir).resolve()
        base_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self._startup_timeout
        for attempt in range(1, _START_ATTEMPTS + 1):
            token = f"schedd-{secrets.token_hex(4)}"  # a fresh cluster identity on every attempt
            self.members = self._new_members(base_dir)
            register_running(self, self.stop)
            try:
                for member in self.members:
                    self._launch(binary, member, token, durable)
                self._wait_healthy(deadline)
                return
            except BaseException as exc:
                lost_port = any(
                    not m.running and any(s in read_tail(m.log_path).lower() for s in _BIND_FAILURE_MARKERS)
                    for m in self.members
                )
                self.stop()
                if isinstance(exc, DevstackError) and lost_port and attempt < _START_ATTEMPTS:
                    continue
                if isinstance(exc, DevstackError):
                    raise DevstackError(f"{exc}\n{self._log_tails()}") from exc
                raise

    def kill(self, index: int) -> EtcdMember:
        """SIGKILL member ``index`` (a crash) and reap it; returns the member."""
        member = self.members[index]
        if member.proc is not None:
            kill_group(member.proc)
            member.proc.wait(timeout=30)
            member.proc = None
        return member

    def stop(self) -> None:
        """SIGTERM every member, bounded by ``stop_timeout`` each, then SIGKILL. Idempotent."""
        try:
            for member in self.members:
                if member.proc is not None:
                    stop_process(member.proc, signal.SIGTERM, self._stop_timeout)
                    member.proc = None
        finally:
            unregister_running(self)

    def raft_leader(self) -> int | None:
        """The index of the member that leads, as the first answering member reports it; None when
        no member answers or none leads."""
        ids: dict[str, int] = {}
        leader = None
        for index, member in enumerate(self.members):
            if not member.running:
                continue
            status = _status(member.client_url)
            if status is None:
                continue
            ids[str(status.get("header", {}).get("member_id"))] = index
            leader = leader or str(status.get("leader", "")) or None
        return None if leader is None else ids.get(leader)

    # -- internals ----------------------------------------------------------------------------------

    def _new_members(self, base_dir: Path) -> list[EtcdMember]:
        ports: set[int] = set()
        while len(ports) < 2 * self.size:
            ports.add(free_port())
        picked = sorted(ports)
        return [
            EtcdMember(f"etcd-{i + 1}", picked[2 * i], picked[2 * i + 1], base_dir / f"etcd-{i + 1}.log")
            for i in range(self.size)
        ]

    def _launch(self, binary: Path, member: EtcdMember, token: str, durable: bool) -> None:
        base_dir = member.log_path.parent
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        cmd = [
            *die_with_parent_prefix("TERM"),
            str(binary),
            f"--name={member.name}",
            # A data directory per start attempt: a half-started member leaves nothing for the next.
            f"--data-dir={base_dir / token / member.name}",
            f"--listen-client-urls={member.client_url}",
            f"--advertise-client-urls={member.client_url}",
            f"--listen-peer-urls={member.peer_url}",
            f"--initial-advertise-peer-urls={member.peer_url}",
            f"--initial-cluster={initial}",
            f"--initial-cluster-token={token}",
            "--initial-cluster-state=new",
        ]
        if not durable and _supports_unsafe_no_fsync(str(binary)):
            cmd.append("--unsafe-no-fsync")
        with member.log_path.open("ab") as log:
            log.write(f"--- {' '.join(cmd)}\n".encode())
            log.flush()
            member.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=base_dir,
                env=child_env(["ETCD_", "ETCDCTL_"]),
                start_new_session=True,
            )

    def _wait_healthy(self, deadline: float) -> None:
        waiting = list(self.members)
        while waiting:
            for member in waiting:
                if not member.running:
                    raise DevstackError(f"etcd member {member.name} exited during start-up")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                names = ", ".join(m.name for m in waiting)
                raise DevstackError(f"etcd members {names} did not report healthy in time")
            waiting = [m for m in waiting if not _healthy(m.client_url, timeout=min(1.0, remaining))]
            if waiting:
                time.sleep(0.05)

    def _log_tails(self) -> str:
        return "\n".join(
            f"--- {m.name} ({m.log_path}):\n{read_tail(m.log_path, 0, 1500)}" for m in self.members
        )


def _status(client_url: str) -> dict[str, Any] | None:
    """The member's ``Maintenance.Status`` through etcd's JSON gateway; None when it does not answer."""
    request = urllib.request.Request(
        f"{client_url}/v3/maintenance/status", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with contextlib.suppress(OSError, ValueError):
        with urllib.request.urlopen(request, timeout=2) as response:
            body = json.loads(response.read())
        return body if isinstance(body, dict) else None
    return None
