"""What a service loads at startup is part of its memory: the registry and a distributed scheduler
read stored DAG specs but never validate new ones or render templates, so they must not load the
spec validator, jsonschema, Jinja or the task runtime (about 9 MB of each process's memory)."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Modules only the api (validating specs and run parameters), the SDK, workers and local executors need.
NOT_FOR_READERS = ("schedd_core.spec", "jsonschema", "jinja2", "schedd_exec.executor")


@pytest.mark.parametrize("service", ["schedd_registry.main", "schedd_scheduler.main"])
def test_a_service_that_only_reads_specs_loads_no_validator_or_template_engine(service: str) -> None:
    code = (
        f"import sys, {service}; "
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {NOT_FOR_READERS!r} "
        f"or m in {NOT_FOR_READERS!r}); "
        "assert not loaded, loaded"
    )
    _passes(code)


@pytest.mark.parametrize(
    "service", ["schedd_api.main", "schedd_registry.main", "schedd_scheduler.main", "schedd_web.main"]
)
def test_no_service_loads_sqlalchemy(service: str) -> None:
    """The services reach PostgreSQL through asyncpg (``schedd_store.database``); SQLAlchemy (about
    22 MB of a process's memory with its asyncio extension) is for ``schedd-migrate``'s Alembic only."""
    code = f"import sys, {service}; loaded = sorted(m for m in sys.modules if m.startswith('sqlalchemy')); "
    _passes(code + "assert not loaded, loaded[:5]")


def test_a_local_executor_still_loads_the_task_runtime() -> None:
    """The other side: choosing the local executor loads what it runs tasks with."""
    code = (
        "import sys; from schedd_scheduler.executors import ExecutorKind, make_executor; "
        "make_executor(ExecutorKind.LOCAL, None, identity='x', parallelism=1, silence_limit=30.0); "
        "assert 'schedd_exec.executor' in sys.modules"
    )
    _passes(code)


def _passes(code: str) -> None:
    """Run ``code`` in a fresh interpreter (nothing imported yet); fail with its error output."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
