"""deploy/compose started for real: a copy of deploy/ with its own secrets (deploy/make-secrets.sh),
brought up with podman-compose (or ``docker compose``) on the images ``make images`` built
(compose.local.yaml), and the CLI pointed at it. Every step is timed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.containers.engine import ROOT, Engine
from tests.polling import wait_until

SCHEDCTL = str(Path(sys.executable).parent / "schedctl")


class Stack:
    def __init__(self, engine: Engine, workdir: Path, project: str) -> None:
        self.engine = engine
        self.project = project
        self.deploy = workdir / "deploy"
        self.compose_dir = self.deploy / "compose"
        self.secrets = self.compose_dir / "secrets"
        self.times: list[tuple[str, float]] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        yield
        elapsed = time.monotonic() - start
        self.times.append((name, elapsed))
        print(f"  {name:<58} {elapsed:6.1f} s", flush=True)

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        files = ["-f", "compose.yaml", "-f", "compose.local.yaml"]
        command = [*self.engine.compose_command(), "-p", self.project, *files, *args]
        result = subprocess.run(
            command,
            cwd=self.compose_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.engine.env(),
        )
        assert result.returncode == 0, f"{' '.join(args)}: {result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result

    def containers(self, service: str | None = None, running: bool = False) -> list[str]:
        filters = ["--filter", f"label=com.docker.compose.project={self.project}"]
        if service:
            filters += ["--filter", f"label=com.docker.compose.service={service}"]
        listed = self.engine.run("ps", *([] if running else ["--all"]), *filters, "--format", "{{.Names}}")
        return sorted(listed.stdout.split())

    def left_behind(self) -> dict[str, list[str]]:
        """Containers, volumes and networks of the project that still exist."""
        volumes = self.engine.run("volume", "ls", "--format", "{{.Name}}").stdout.split()
        networks = self.engine.run("network", "ls", "--format", "{{.Name}}").stdout.split()
        prefixes = (f"{self.project}_", f"{self.project}-")
        return {
            "containers": self.containers(),
            "volumes": [v for v in volumes if v.startswith(prefixes)],
            "networks": [n for n in networks if n.startswith(prefixes)],
        }

    def wait_healthy(self, timeout: float = 180) -> list[str]:
        """Every running container with a health check passes it (podman runs checks only when asked:
        the wrapper asks until each passes; Docker runs them itself)."""
        names = [
            name
            for name in self.containers(running=True)
            if self.engine.run("inspect", "--format", "{{.Config.Healthcheck}}", name).stdout.strip()
            not in ("", "<nil>", "{[] 0s 0s 0s 0s 0}")
        ]
        if self.engine.kind == "docker":
            for name in names:

                def healthy(name: str = name) -> bool:
                    return self._docker_health(name) == "healthy"

                wait_until(f"{name} healthy", healthy, timeout, interval=0.5, retry_on=(Exception,))
        else:
            wrapper = ROOT / "deploy/compose/podman-health-wrapper.sh"
            env = {**self.engine.env(), "HEALTH_WAIT_TIMEOUT": str(int(timeout))}
            subprocess.run([str(wrapper), "wait", "--condition=healthy", *names], check=True, env=env)
        return names

    def _docker_health(self, name: str) -> str:
        return self.engine.run("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()

    def exit_code(self, name: str) -> int:
        return int(self.engine.run("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip())

    def api_address(self) -> str:
        (api,) = self.containers("api", running=True)
        return self.engine.run("port", api, "50051").stdout.split()[0].replace("0.0.0.0", "127.0.0.1")

    def cli_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SCHEDD_API": self.api_address(),
            "SCHEDCTL_TLS_CA": str(self.secrets / "tls/ca.crt"),
            "SCHEDCTL_TOKEN": (self.secrets / "bootstrap-token").read_text().strip(),
        }

    def schedctl(self, *args: str, timeout: float = 120) -> str:
        result = subprocess.run(
            [SCHEDCTL, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=self.cli_env()
        )
        assert result.returncode == 0, f"schedctl {' '.join(args)}: {result.stdout}\n{result.stderr}"
        return result.stdout + result.stderr

    def schedctl_json(self, *args: str) -> Any:
        result = subprocess.run(
            [SCHEDCTL, *args, "-o", "json"], capture_output=True, text=True, timeout=60, env=self.cli_env()
        )
        assert result.returncode == 0, f"schedctl {' '.join(args)}: {result.stderr}"
        return json.loads(result.stdout)


@contextmanager
def stack(engine: Engine, workdir: Path, project: str) -> Iterator[Stack]:
    """A copy of deploy/ with secrets of its own, torn down (``down --volumes``) however the test ends."""
    shutil.copytree(ROOT / "deploy", workdir / "deploy", ignore=shutil.ignore_patterns("secrets", ".env"))
    started = Stack(engine, workdir, project)
    try:
        yield started
    finally:
        for name in started.containers():
            engine.run("rm", "--force", name, check=False)
        subprocess.run(
            [*engine.compose_command(), "-p", project, "-f", "compose.yaml", "-f", "compose.local.yaml",
             "down", "--volumes"],
            cwd=started.compose_dir, capture_output=True, timeout=300, env=engine.env(), check=False,
        )  # fmt: skip
