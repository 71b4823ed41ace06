"""What the leader's asset watchers watch, read once from ``SCHEDD_ASSET_WATCHERS`` (a JSON list).

Each entry names a watcher (``name``, unique: it is part of every event's idempotency key, so a
watcher renamed delivers its messages again), its ``kind`` and the ``asset`` URI its events are for:

- ``redis_stream``: ``url`` (``redis://host:port/db``), ``stream``, ``group`` (the consumer group;
  default ``schedd``);
- ``postgres_table``: ``dsn`` (``postgresql://...``), ``table`` (``name`` or ``schema.name``, with a
  strictly increasing bigint column ``id``), ``channel`` (optional: a NOTIFY channel that says rows
  were added; without one the table is read every ``poll_seconds``).

A malformed entry is a ValueError naming it, before the scheduler starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from schedd_core.assets import normalize_uri
from schedd_core.errors import InvalidArgument

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
KINDS = ("redis_stream", "postgres_table")


@dataclass(frozen=True)
class WatcherSpec:
    name: str
    kind: str
    asset: str
    url: str = ""
    stream: str = ""
    group: str = "schedd"
    table: str = ""
    channel: str = ""
    poll_seconds: float = 1.0


def parse_watchers(text: str) -> tuple[WatcherSpec, ...]:
    """The watchers of ``SCHEDD_ASSET_WATCHERS`` (empty text: none)."""
    if not text.strip():
        return ()
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"SCHEDD_ASSET_WATCHERS is not JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ValueError("SCHEDD_ASSET_WATCHERS must be a JSON list of watchers")
    specs = tuple(_watcher(i, e) for i, e in enumerate(entries))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("SCHEDD_ASSET_WATCHERS: two watchers have the same name")
    return specs


def _watcher(i: int, entry: object) -> WatcherSpec:
    where = f"SCHEDD_ASSET_WATCHERS[{i}]"
    if not isinstance(entry, dict) or not all(isinstance(v, str | int | float) for v in entry.values()):
        raise ValueError(f"{where}: must be an object of strings")
    name, kind = str(entry.get("name", "")), str(entry.get("kind", ""))
    if not _NAME.match(name):
        raise ValueError(f"{where}.name: 1 to 64 letters, digits, '_', '.' or '-'")
    if kind not in KINDS:
        raise ValueError(f"{where}.kind: one of {', '.join(KINDS)}, not {kind!r}")
    try:
        asset = normalize_uri(f"{where}.asset", str(entry.get("asset", "")))
    except InvalidArgument as exc:
        raise ValueError(str(exc)) from None
    if kind == "redis_stream":
        url, stream = str(entry.get("url", "")), str(entry.get("stream", ""))
        if not url.startswith(("redis://", "rediss://", "unix://")) or not stream:
            raise ValueError(f"{where}: a redis_stream watcher needs a redis:// url and a stream")
        return WatcherSpec(name, kind, asset, url=url, stream=stream, group=str(entry.get("group", "schedd")))
    dsn, table, channel = (
        str(entry.get("dsn", "")),
        str(entry.get("table", "")),
        str(entry.get("channel", "")),
    )
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"{where}.dsn: must be a postgresql:// URL")
    if not _IDENTIFIER.match(table):
        raise ValueError(f"{where}.table: must be a table name or schema.name, not {table!r}")
    if channel and not _IDENTIFIER.match(channel):
        raise ValueError(f"{where}.channel: must be an identifier, not {channel!r}")
    poll = float(entry.get("poll_seconds", 1.0))
    if not 0.01 <= poll <= 3600:
        raise ValueError(f"{where}.poll_seconds: must be between 0.01 and 3600")
    return WatcherSpec(name, kind, asset, url=dsn, table=table, channel=channel, poll_seconds=poll)
