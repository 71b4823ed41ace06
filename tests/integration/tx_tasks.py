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


async def touch_scheduler_table(connection: Any) -> None:
    """Tries to change schedd's own state from task code: the task role must not be allowed to."""
    await connection.execute("UPDATE task_instances SET state = 'success'")


def schedd_settings() -> list[str]:
    """The SCHEDD_* variables a (non-transactional) Python task sees."""
    import os

    return sorted(k for k in os.environ if k.startswith("SCHEDD_"))


#: Set in the workers' environment by the tests: where ``record_success`` appends the events it gets.
EVENTS_FILE_ENV = "TX_EVENTS_FILE"


def record_success(params: dict[str, Any]) -> None:
    """A Python callback: append the event it was given to the events file, one JSON object a line."""
    import json
    import os

    with open(os.environ[EVENTS_FILE_ENV], "a") as f:
        f.write(json.dumps(params, sort_keys=True) + "\n")
