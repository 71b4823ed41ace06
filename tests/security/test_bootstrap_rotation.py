"""Attacks with a replaced bootstrap token: whoever still holds the old ``SCHEDD_BOOTSTRAP_TOKEN``
after an operator changed it must lose admin at the api's next start, and no replica still
configured with it may bring it back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import pytest

from schedd_api.config import ApiConfig
from schedd_api.main import ensure_bootstrap_token
from schedd_auth.tokens import Token, new_token
from schedd_core.errors import InvalidArgument
from schedd_devstack.ports import free_port
from schedd_devstack.postgres import asyncpg_dsn
from schedd_store import tokens
from schedd_store.engine import make_engine
from schedd_store.migrate import upgrade_async

pytestmark = pytest.mark.integration

START_TIMEOUT = 60.0


@pytest.fixture
def migrated_url(fresh_database_url: str) -> Iterator[str]:
    asyncio.run(upgrade_async(fresh_database_url))
    yield fresh_database_url


def start_up(url: str, token: Token) -> None:
    """The api's start-up step that stores ``SCHEDD_BOOTSTRAP_TOKEN``."""
    asyncio.run(ensure_bootstrap_token(ApiConfig(database_url=url, bootstrap_token=str(token))))


def admits(url: str, token: Token) -> str:
    """The name ``token`` authenticates as, or why it is refused."""

    async def lookup() -> str:
        engine = make_engine(url, pool_size=1)
        try:
            found = await tokens.authenticate(engine, token)
        finally:
            await engine.dispose()
        return found.record.name if found.record else f"refused: {found.refusal}"

    return asyncio.run(lookup())


def query(url: str, statement: str) -> list[dict[str, object]]:
    async def run() -> list[dict[str, object]]:
        conn = await asyncpg.connect(asyncpg_dsn(url), timeout=10)
        try:
            return [dict(r) for r in await conn.fetch(statement, timeout=10)]
        finally:
            await conn.close()

    return asyncio.run(run())


def bootstrap_rows(url: str) -> list[dict[str, object]]:
    return query(
        url,
        "SELECT token_id, name, role, revoked_at IS NOT NULL AS revoked FROM api_tokens "
        "WHERE name LIKE 'bootstrap-admin%' ORDER BY created_at",
    )


def test_a_changed_bootstrap_token_revokes_the_old_one(migrated_url: str) -> None:
    old, new = new_token(), new_token()
    start_up(migrated_url, old)
    assert admits(migrated_url, old) == "bootstrap-admin"
    start_up(migrated_url, new)
    assert admits(migrated_url, new) == "bootstrap-admin"
    assert admits(migrated_url, old).startswith("refused: token 'bootstrap-admin-retired-")
    assert [(r["name"], r["role"], r["revoked"]) for r in bootstrap_rows(migrated_url)] == [
        (f"bootstrap-admin-retired-{old.token_id}", "admin", True),
        ("bootstrap-admin", "admin", False),
    ]


def test_a_replica_still_holding_the_old_token_cannot_bring_it_back(migrated_url: str) -> None:
    old, new = new_token(), new_token()
    start_up(migrated_url, old)
    start_up(migrated_url, new)
    before = bootstrap_rows(migrated_url)
    with pytest.raises(InvalidArgument, match="SCHEDD_BOOTSTRAP_TOKEN: was the bootstrap-admin token"):
        start_up(migrated_url, old)
    assert bootstrap_rows(migrated_url) == before
    assert admits(migrated_url, old).startswith("refused")
    assert admits(migrated_url, new) == "bootstrap-admin"


def test_the_same_bootstrap_token_again_changes_nothing_and_a_revoked_one_stays_revoked(
    migrated_url: str,
) -> None:
    token = new_token()
    start_up(migrated_url, token)
    start_up(migrated_url, token)
    assert admits(migrated_url, token) == "bootstrap-admin"
    query(migrated_url, "UPDATE api_tokens SET revoked_at = now() WHERE name = 'bootstrap-admin'")
    start_up(migrated_url, token)
    assert admits(migrated_url, token) == "refused: token 'bootstrap-admin' was revoked"


def test_a_bootstrap_token_forged_on_the_stored_id_is_refused(migrated_url: str) -> None:
    token = new_token()
    start_up(migrated_url, token)
    forged = Token(token.token_id, new_token().secret)
    with pytest.raises(InvalidArgument, match="another secret"):
        start_up(migrated_url, forged)
    assert admits(migrated_url, token) == "bootstrap-admin"


def test_the_api_refuses_to_start_with_a_replaced_bootstrap_token(migrated_url: str) -> None:
    old, new = new_token(), new_token()
    start_up(migrated_url, old)
    start_up(migrated_url, new)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")},
        "SCHEDD_DATABASE_URL": migrated_url,
        "SCHEDD_API_LISTEN": f"127.0.0.1:{free_port()}",
        "SCHEDD_BOOTSTRAP_TOKEN": str(old),
    }
    result = subprocess.run(
        [sys.executable, "-m", "schedd_api.main"],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "SCHEDD_BOOTSTRAP_TOKEN: was the bootstrap-admin token" in result.stderr
    assert admits(migrated_url, old).startswith("refused")
