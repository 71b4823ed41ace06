"""The walk-through of docs/deploy.md ("docker compose", "Trying it end to end"), as a user runs it:
secrets, the stack up and healthy, tokens, a DAG registered with its code bundle, a run triggered
and waited for, its logs, workers scaled to three and drained back to one, and ``down --volumes``
leaving nothing behind. Each step's time is printed."""

from __future__ import annotations

import os
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.containers.engine import Engine
from tests.containers.stack import Stack, stack
from tests.polling import wait_until


def _active_workers(running: Stack) -> list[str]:
    workers = running.schedctl_json("workers", "list")
    workers = workers.get("workers", []) if isinstance(workers, dict) else workers
    return sorted(w["worker_id"] for w in workers if w.get("state") == "active")


def _start(running: Stack) -> None:
    with running.step("deploy/make-secrets.sh"):
        subprocess.run([str(running.deploy / "make-secrets.sh")], check=True, capture_output=True)
    with running.step("up --detach (images of make images)"):
        running.compose("up", "--detach")
    with running.step("every health check passes"):
        healthy = running.wait_healthy()
    services = {name.split("_")[-2] if "_" in name else name.split("-")[-2] for name in healthy}
    assert {"etcd", "postgres", "api", "registry", "scheduler", "worker", "web"} <= services, healthy
    assert len(running.containers("scheduler", running=True)) == 2, "two schedulers (one leads)"
    for one_shot in ("etcd-init", "migrate", "worker-token"):
        for name in running.containers(one_shot):
            assert running.exit_code(name) == 0, f"{name} exited with {running.exit_code(name)}"


def _run_a_dag(running: Stack) -> None:
    with running.step("schedctl tokens create alice --role operator"):
        assert "sdt_" in running.schedctl("tokens", "create", "alice", "--role", "operator")
    with running.step("schedctl dags register examples/branching.py --unpause"):
        out = running.schedctl("dags", "register", "examples/branching.py", "--unpause")
        assert "code bundle" in out and "registered" in out, out
    with running.step("schedctl runs trigger branching --wait"):
        running.schedctl("runs", "trigger", "branching", "--wait")
    with running.step("schedctl tasks logs branching/@latest incremental"):
        assert "applying the latest changes" in running.schedctl(
            "tasks", "logs", "branching/@latest", "incremental"
        )
    with running.step("--profile tools run --rm schedctl leader"):
        out = running.compose("--profile", "tools", "run", "--rm", "schedctl", "leader").stdout
        assert "token" in out.lower(), out


def _web_ui(running: Stack) -> None:
    """The web UI answers on its published port and offers the sign-in form (signing in and every
    view are tests/web's; this is the container's wiring)."""
    port = os.environ["SCHEDD_WEB_PORT"]
    with running.step(f"web UI: GET http://127.0.0.1:{port}/signin"):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/signin", timeout=10) as response:
            page = response.read().decode()
        assert response.status == 200 and 'name="token"' in page, page[:500]


def _scale(running: Stack) -> None:
    with running.step("up --detach --scale worker=3 worker"):
        running.compose("up", "--detach", "--scale", "worker=3", "worker")
        wait_until(
            "three active workers",
            lambda: len(_active_workers(running)) == 3,
            120,
            interval=0.5,
            retry_on=(Exception,),
        )
    with running.step("schedctl runs trigger branching --wait (3 workers)"):
        running.schedctl("runs", "trigger", "branching", "--wait")
    extra = running.containers("worker", running=True)[1:]
    with running.step("scale back to 1: stop (SIGTERM, drain) and remove 2 workers"):
        if running.engine.kind == "docker":
            running.compose("up", "--detach", "--scale", "worker=1", "worker")
        else:  # podman-compose does not remove replicas when scaled down
            running.engine.run("stop", "--time", "90", *extra, timeout=120)
            for name in extra:
                assert running.exit_code(name) == 0, f"{name} did not drain cleanly"
                assert "drain" in running.engine.run("logs", name).stderr.lower()
            running.engine.run("rm", *extra)
        wait_until(
            "one active worker",
            lambda: len(_active_workers(running)) == 1,
            120,
            interval=0.5,
            retry_on=(Exception,),
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_compose_walkthrough(
    container_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = f"schedd-walkthrough-{os.getpid()}"
    monkeypatch.setenv("SCHEDD_WEB_PORT", str(_free_port()))
    with stack(container_engine, tmp_path, project) as running:
        print(f"\ncompose walk-through ({container_engine.kind}, project {project}):")
        _start(running)
        _run_a_dag(running)
        _web_ui(running)
        _scale(running)
        with running.step("down --volumes"):
            running.compose("down", "--volumes")
        assert running.left_behind() == {"containers": [], "volumes": [], "networks": []}
        total = sum(seconds for _, seconds in running.times)
        print(f"  {'total':<58} {total:6.1f} s")
