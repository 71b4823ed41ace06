"""Property: whatever the interleaving of two leaders' fence raises and writes, exactly the writes
made under the highest token raised so far land, and nothing else does."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from schedd_core.errors import FencedOut
from schedd_store.engine import make_engine
from schedd_store.fence import Fence, raise_fence
from schedd_store.named_sql import Statement

pytestmark = pytest.mark.integration

LEADERS = ("a", "b")
Op = tuple[str, str]  # ("raise" | "write", leader)
ops_strategy = st.lists(st.tuples(st.sampled_from(["raise", "write"]), st.sampled_from(LEADERS)), max_size=12)


def expected_marks(ops: list[Op]) -> list[tuple[str, int]]:
    """The model: tokens come from one growing counter (like etcd revisions); a write lands iff the
    writer's token is the fence's current value."""
    revision = 0
    fence = 0
    tokens: dict[str, int] = {}
    landed = []
    for op, leader in ops:
        if op == "raise":
            revision += 1
            tokens[leader] = revision
            fence = max(fence, revision)
        elif leader in tokens and tokens[leader] == fence:
            landed.append((leader, tokens[leader]))
    return landed


async def run_against_postgres(url: str, ops: list[Op]) -> list[tuple[str, int]]:
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(Statement("DELETE FROM outbox"))
            await conn.execute(Statement("UPDATE scheduler_fence SET token = 0, holder = ''"))
        revision = 0
        tokens: dict[str, int] = {}
        for op, leader in ops:
            if op == "raise":
                revision += 1
                tokens[leader] = revision
                await raise_fence(engine, revision, leader)  # always newer: the counter only grows
            elif leader in tokens:
                try:
                    async with Fence(engine, tokens[leader]).transaction() as conn:
                        await conn.execute(
                            Statement(
                                "INSERT INTO outbox (topic, payload) VALUES (:leader, CAST(:token AS jsonb))"
                            ),
                            {"leader": leader, "token": str(tokens[leader])},
                        )
                except FencedOut:
                    pass
        async with engine.connect() as conn:
            rows = (await conn.execute(Statement("SELECT topic, payload FROM outbox ORDER BY id"))).all()
        return [(r.topic, int(r.payload)) for r in rows]
    finally:
        await engine.dispose()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_strategy)
def test_only_writes_under_the_highest_token_land(migrated_url: str, ops: list[Op]) -> None:
    assert asyncio.run(run_against_postgres(migrated_url, ops)) == expected_marks(ops)
