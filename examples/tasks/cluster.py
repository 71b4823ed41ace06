"""Tasks of ``examples/setup_teardown.py``: a scratch "cluster" (a directory) made, used, removed.

Each run gets its own directory under the system's temporary directory, named by the run's
idempotency key, so concurrent runs do not share one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from schedd_sdk import setup, task, teardown


def _cluster_dir(context: dict[str, str]) -> Path:
    key = context.get("SCHEDD_IDEMPOTENCY_KEY", "local").rsplit("/", 1)[0].replace("/", "_")
    return Path(tempfile.gettempdir()) / f"schedd-example-cluster-{key}"


@setup
def create_cluster(context: dict[str, str]) -> str:
    """Make the run's scratch directory; returns its path."""
    path = _cluster_dir(context)
    path.mkdir(parents=True, exist_ok=True)
    print(f"created {path}")
    return str(path)


@task(params={"fail": False})
def run_job(cluster: str, params: dict[str, Any]) -> int:
    """Write a file into the cluster; fails on purpose when the run's conf says ``{"fail": true}``."""
    if params.get("fail"):
        raise RuntimeError("the job fails on purpose (conf fail=true)")
    (Path(cluster) / "output.txt").write_text("42\n")
    return 42


@teardown
def delete_cluster(cluster: str) -> str:
    """Remove the scratch directory, whatever the job did."""
    shutil.rmtree(cluster, ignore_errors=True)
    print(f"deleted {cluster}")
    return f"deleted {cluster}"
