"""Pages of a DAG's grid: how many runs a page shows (``?runs=``, default :data:`DEFAULT_RUNS`) and
how many newer runs it skips (``?offset=``), read from the api's listing of the DAG's runs (newest
first, by creation).

Guaranteed: a page lists at most :data:`MAX_RUNS` runs and skips at most :data:`MAX_OFFSET`, so
one page costs a bounded number of ``ListRuns`` pages. Not guaranteed: an older page stays the same
(runs made meanwhile shift every page by as many runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_web.api import Api

#: Runs a page shows unless ``?runs=`` says otherwise, and at most.
DEFAULT_RUNS = 20
MAX_RUNS = 50
#: Newer runs a page may skip at most.
MAX_OFFSET = 10_000
#: The api's largest page of a listing.
_LIST_PAGE = 1000


def _number(query: Any, name: str, default: int, low: int, high: int) -> int:
    raw = str(query.get(name, "")).strip()
    if not raw:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise web.HTTPBadRequest(text=f"{name}: must be a whole number from {low} to {high}, not {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class GridPage:
    count: int = DEFAULT_RUNS
    offset: int = 0

    @classmethod
    def read(cls, query: Any) -> GridPage:
        """The page ``?runs=`` and ``?offset=`` ask for; 400 for a value out of bounds."""
        return cls(
            count=_number(query, "runs", DEFAULT_RUNS, 1, MAX_RUNS),
            offset=_number(query, "offset", 0, 0, MAX_OFFSET),
        )

    @property
    def newest(self) -> bool:
        """Whether the page shows the newest runs (and so takes in new ones)."""
        return self.offset == 0

    def query(self, offset: int | None = None) -> str:
        """The query string of this page, or of the page at ``offset`` with as many runs."""
        offset = self.offset if offset is None else max(0, offset)
        parts = [f"runs={self.count}"] if self.count != DEFAULT_RUNS else []
        parts += [f"offset={offset}"] if offset else []
        return "?" + "&".join(parts) if parts else ""

    @property
    def newer(self) -> str:
        return self.query(self.offset - self.count)

    @property
    def older(self) -> str:
        return self.query(self.offset + self.count)


async def list_page(api: Api, dag_id: str, token: str, page: GridPage) -> tuple[list[pb.DagRun], bool]:
    """The page's runs (newest first, without task instances) and whether older runs exist."""
    wanted = page.offset + page.count + 1
    found: list[pb.DagRun] = []
    page_token = ""
    while len(found) < wanted:
        request = api_pb2.ListRunsRequest(
            parent=f"dags/{dag_id}", page_size=min(wanted - len(found), _LIST_PAGE), page_token=page_token
        )
        listed = await api.call(api.runs.ListRuns, request, token)
        found.extend(listed.runs)
        page_token = listed.next_page_token
        if not page_token:
            break
    return found[page.offset : page.offset + page.count], len(found) > page.offset + page.count
