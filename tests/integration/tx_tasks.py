"""Transactional task functions used by the tests (imported by workers as ``tests.integration.tx_tasks``)."""

from __future__ import annotations

from typing import Any

TABLE = "CREATE TABLE IF NOT EXISTS tx_demo (key text PRIMARY KEY, attempt text NOT NULL)"


async def write_row(connection: Any, context: dict[str, str]) -> dict[str, int]:
    await connection.execute(
        "INSERT INTO tx_demo VALUES ($1, $2)", context["SCHEDD_IDEMPOTENCY_KEY"], context["SCHEDD_ATTEMPT_ID"]
    )
    return {"written": 1}


async def write_then_fail(connection: Any, context: dict[str, str]) -> None:
    await connection.execute(
        "INSERT INTO tx_demo VALUES ($1, $2)", context["SCHEDD_IDEMPOTENCY_KEY"], context["SCHEDD_ATTEMPT_ID"]
    )
    raise RuntimeError("failing after writing")
