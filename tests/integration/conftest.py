"""Fixtures for integration tests of the store: a freshly migrated database and an engine on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from schedd_store.database import Engine
from schedd_store.engine import make_engine
from schedd_store.migrate import upgrade_async


@pytest.fixture
async def migrated_url(fresh_database_url: str) -> str:
    await upgrade_async(fresh_database_url)
    return fresh_database_url


@pytest.fixture
async def engine(migrated_url: str) -> AsyncIterator[Engine]:
    engine = make_engine(migrated_url, pool_size=5, application_name="schedd-test")
    yield engine
    await engine.dispose()
