"""Python tasks the web UI's browser tests run. Workers run with the repository root as their
working directory and import this module as ``tests.web.web_tasks``; the tests never call it."""

from __future__ import annotations

from typing import Any

#: Markup that would set ``window.__xss`` if a page ever ran it instead of showing it as text.
SCRIPT = "<script>window.__xss='result'</script>"
URL = "javascript:window.__xss='result-url'"


def hostile_result() -> dict[str, Any]:
    """A result made of markup and a ``javascript:`` URL, printed to the log as well."""
    print(f"log says {SCRIPT} and {URL}")
    return {"html": SCRIPT, "link": URL, "img": "<img src=x onerror=\"window.__xss='img'\">"}


def square(x: int) -> int:
    """A mapped task's function: one instance per value of ``x``."""
    return x * x
