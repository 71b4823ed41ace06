"""Fixtures of the container tests: the engine (podman's API or Docker) and the images ``make images``
built. Containers are stopped by the tests' own teardown (the reaper's image is not pulled)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.containers.engine import GATE, IMAGES, Engine, engine, gate, unavailable

# Without the gate the tests would skip anyway; their modules are not even collected, because they
# import the `containers` extra (docker, testcontainers) that only the container make targets install.
if not os.environ.get(GATE):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def container_engine() -> Iterator[Engine]:
    gate()
    with engine() as found:
        from testcontainers.core.config import testcontainers_config

        testcontainers_config.ryuk_disabled = True
        saved = {name: os.environ.get(name) for name in ("DOCKER_HOST", "TESTCONTAINERS_RYUK_DISABLED")}
        os.environ.update(DOCKER_HOST=found.host, TESTCONTAINERS_RYUK_DISABLED="true")
        missing = [image for image in IMAGES if not found.image_exists(image)]
        if missing:
            unavailable(f"images {missing} are missing: make images")
        try:
            yield found
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
