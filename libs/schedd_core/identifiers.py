"""Identifiers of DAGs, tasks, pools, queues and runs, and the one check every entry point applies."""

from __future__ import annotations

import re

from schedd_core.errors import InvalidArgument, quote
from schedd_core.limits import MAX_ID_CHARS

#: Ids of DAGs, tasks, pools and runs: letters, digits and ``_ - .``, starting with a letter or digit.
ID_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{MAX_ID_CHARS - 1}}}")


def check_id(field: str, value: str) -> None:
    """Raise unless ``value`` is a valid schedd identifier (the message quotes at most 60 characters)."""
    if not value:
        raise InvalidArgument(field, "must not be empty")
    if not ID_PATTERN.fullmatch(value):
        raise InvalidArgument(
            field,
            f"{quote(value)} is not a valid id: use letters, digits, '_', '-' or '.', start with a letter or "
            f"digit, at most {MAX_ID_CHARS} characters",
        )
