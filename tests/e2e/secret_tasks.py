"""Python tasks and notifiers of ``test_alerts_and_secrets``: they read variables and connections the
way Airflow tasks do, print them (the worker must mask them), and write what they saw to a file (the
test's evidence that the read worked, since the log must not show it)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

from schedd_sdk import Connection, Notifier, Variable

EVIDENCE_ENV = "SECRET_TASKS_EVIDENCE"


def _evidence(record: dict[str, Any]) -> None:
    with open(os.environ[EVIDENCE_ENV], "a") as f:
        f.write(json.dumps(record) + "\n")


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def print_secrets() -> str:
    """Reads a variable and a connection, prints both (the log must show *** instead), and records
    digests of what it read."""
    token = Variable.get("api_token")
    db = Connection.get("warehouse")
    missing = Variable.get("no_such_variable", default="fallback")
    print(f"the token is {token}")
    print(f"the password is {db.password}, the uri {db.get_uri()}")
    # Written in two pieces: the worker may not let a split value through.
    half = len(token) // 2
    sys.stdout.write(token[:half])
    sys.stdout.flush()
    time.sleep(0.2)
    sys.stdout.write(token[half:] + "\n")
    sys.stdout.flush()
    _evidence(
        {
            "task": "print_secrets",
            "token": _digest(token),
            "password": _digest(db.password),
            "host": db.host,
            "port": db.port,
            "login": db.login,
            "schema": db.schema,
            "extra": db.extra_dejson,
            "missing": missing,
            "from_env": Variable.get("from_env"),
            "from_file": Variable.get("from_file"),
        }
    )
    return "read"


def fail_with_secret() -> None:
    """Raises with the value in the message: the stored error and log must mask it."""
    token = Variable.get("api_token")
    raise RuntimeError(f"cannot use {token}")


def read_granted_elsewhere() -> str:
    """Asks for a variable granted to another DAG only: the read is refused."""
    try:
        Variable.get("only_for_owner")
    except PermissionError as exc:
        _evidence({"task": "read_granted_elsewhere", "refused": str(exc)})
        return "refused"
    _evidence({"task": "read_granted_elsewhere", "refused": ""})
    return "read"


def read_granted_here() -> str:
    _evidence({"task": "read_granted_here", "value": _digest(Variable.get("only_for_owner"))})
    return "read"


def sleep_long() -> None:
    time.sleep(60)


class RecordingNotifier(Notifier):
    """Writes every event it is given to the evidence file."""

    def notify(self, event: dict[str, Any]) -> None:
        _evidence({"task": "notifier", "event": event})
