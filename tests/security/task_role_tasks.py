"""Task functions of ``test_task_role`` (imported by workers as ``tests.security.task_role_tasks``)."""

from __future__ import annotations

import hashlib
import os
from typing import Any


async def environment_digests(connection: Any) -> list[str]:
    """A transactional task: the SHA-256 (hex) of every environment variable's value it sees."""
    return sorted({hashlib.sha256(value.encode()).hexdigest() for value in os.environ.values()})
