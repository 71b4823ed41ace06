"""Which event loop each service runs on (docs/architecture.md, "Services").

The api, the registry and the web UI run on uvloop's loop. The worker and the scheduler must not:
they spawn task processes (the scheduler through a local executor), and uvloop spawns with fork(),
which runs gRPC's fork handlers in the child of a process whose gRPC threads are busy; a bench run
with the worker on uvloop had shell tasks killed by SIGSEGV. asyncio's loop spawns without them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("service", ["schedd_worker.main", "schedd_scheduler.main"])
def test_a_service_that_spawns_task_processes_never_loads_uvloop(service: str) -> None:
    code = f"import sys, {service}; assert 'uvloop' not in sys.modules"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
