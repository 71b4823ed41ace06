"""What the benchmark sections share: schedctl against a cluster, registering specs, percentiles,
stopping the processes they start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from schedd_devstack.services import Cluster

NOOP = "tests.benchmarks.noop:noop"
NAP = "tests.benchmarks.noop:nap"
DOZE = "tests.benchmarks.noop:doze"


def schedctl(cluster: Cluster, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "schedctl.main", "--api", cluster.api_address, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"schedctl {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


def register(cluster: Cluster, spec: dict[str, Any], workdir: Path) -> None:
    path = workdir / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    schedctl(cluster, "dags", "register", str(path))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def stop(process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """SIGTERM ``process`` and wait for it; SIGKILL it if it is still there after ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
