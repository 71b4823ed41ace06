"""The container engine the container tests drive: podman through its Docker-compatible API (started
here on a socket of its own), or any engine ``DOCKER_HOST`` already names (Docker).

``SCHEDD_CONTAINER_TESTS`` decides what happens without an engine: unset, the tests skip (they are
run by ``make images-test``, ``make compose-test`` and ``make test-containers-faults``); ``1``,
they run and skip when no engine is installed; ``require`` (what the make targets set), a missing
engine or image fails them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
GATE = "SCHEDD_CONTAINER_TESTS"
SCHEDD_IMAGE = os.environ.get("SCHEDD_IMAGE", "localhost/schedd:0.1.0")
POSTGRES_IMAGE = "localhost/schedd-postgres:15"
ETCD_IMAGE = "localhost/schedd-etcd:3.4"
IMAGES = (SCHEDD_IMAGE, POSTGRES_IMAGE, ETCD_IMAGE)

T = TypeVar("T")


def unavailable(reason: str) -> None:
    """Skip, or fail where the make target requires the engine."""
    if os.environ.get(GATE) == "require":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def gate() -> None:
    if not os.environ.get(GATE):
        pytest.skip(
            f"container tests run with make images-test / compose-test / test-containers-faults ({GATE}=1)"
        )


@dataclass
class Engine:
    """``cli`` is the engine's command line (podman or docker), ``host`` the API's DOCKER_HOST."""

    kind: str
    cli: str
    host: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host, "TESTCONTAINERS_RYUK_DISABLED": "true"}

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.cli, *args], capture_output=True, text=True, check=check, timeout=timeout, env=self.env()
        )

    def compose_command(self) -> list[str]:
        """podman-compose with the health-check wrapper, or docker's compose plugin."""
        if self.kind == "docker":
            return [self.cli, "compose"]
        wrapper = ROOT / "deploy/compose/podman-health-wrapper.sh"
        podman_compose = shutil.which("podman-compose") or str(Path(sys.executable).parent / "podman-compose")
        return [podman_compose, "--podman-path", str(wrapper)]

    def image_exists(self, image: str) -> bool:
        return self.run("image", "inspect", image, check=False).returncode == 0


@contextmanager
def engine() -> Iterator[Engine]:
    """The engine ``DOCKER_HOST`` names, or podman's API service on a socket in a temporary directory
    for as long as the tests run."""
    host = os.environ.get("DOCKER_HOST")
    if host and not os.environ.get("SCHEDD_CONTAINER_ENGINE", "").startswith("podman"):
        cli = shutil.which("docker")
        if cli is None:
            unavailable("DOCKER_HOST is set but the docker command is not installed")
        yield Engine("docker", str(cli), host)
        return
    podman = shutil.which("podman")
    if podman is None:
        unavailable("podman is not installed (apt-get install podman runc; docs/deploy.md)")
    with tempfile.TemporaryDirectory(prefix="schedd-podman-") as tmp:
        socket = Path(tmp) / "podman.sock"
        service = subprocess.Popen(
            [str(podman), "system", "service", "--time=0", f"unix://{socket}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until("podman's API socket", socket.exists, 20, interval=0.1, retry_on=(Exception,))
            yield Engine("podman", str(podman), f"unix://{socket}")
        finally:
            service.terminate()
            service.wait(10)
