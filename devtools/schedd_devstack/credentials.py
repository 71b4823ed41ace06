"""Tokens for a local cluster started with authentication: an admin token for schedctl and the
tests, and one worker token every worker of the cluster connects with. Both are stored in the
cluster's database like any other token (``schedd_store.tokens``)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from schedd_store import tokens
from schedd_store.engine import make_engine


@dataclass(frozen=True)
class ClusterTokens:
    admin: str
    worker: str


async def create_cluster_tokens(database_url: str, tag: str) -> ClusterTokens:
    """New tokens named ``admin-TAG`` and ``workers-TAG`` (a database used before keeps its own)."""
    engine = make_engine(database_url, pool_size=1, application_name="schedd-devstack")
    try:
        _, admin = await tokens.create_token(engine, f"admin-{tag}", "admin", created_by="devstack")
        _, worker = await tokens.create_token(engine, f"workers-{tag}", "worker", created_by="devstack")
    finally:
        await engine.dispose()
    return ClusterTokens(str(admin), str(worker))


def write_secret(path: Path, text: str) -> None:
    """Write ``text`` to a new file at ``path``, created readable and writable by its owner only.

    Whatever was at ``path`` (an older file, a symlink) is removed first, never written through, so
    a reader that opened it earlier sees none of ``text``. Not guaranteed: secrecy from root, or
    from whoever may write the directory (they may replace the file after it was written).
    """
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
