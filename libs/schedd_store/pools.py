"""Pools: named slot counts that cap how many task instances run at once."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from schedd_store import statements as sql


async def pool_names(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return [r[0] for r in (await conn.execute(sql.LIST_POOL_NAMES)).all()]
