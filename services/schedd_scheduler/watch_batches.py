"""What a watcher delivers in one fenced transaction: at most ``BATCH`` messages, each an event
whose extra is the message as JSON, or ``{}`` when that is over the size limit or holds NUL."""

from __future__ import annotations

import json
from typing import Any

from schedd_core.assets import MAX_EXTRA_BYTES

#: Most messages one fenced transaction delivers.
BATCH = 100


def bounded_extra(value: dict[str, Any]) -> dict[str, Any]:
    """``value``, or {} when its JSON is over the size limit or holds NUL."""
    text = json.dumps(value, default=str)
    if len(text.encode()) > MAX_EXTRA_BYTES or "\\u0000" in text:
        return {}
    parsed: dict[str, Any] = json.loads(text)
    return parsed
