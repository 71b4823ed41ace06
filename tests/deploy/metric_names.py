"""The Prometheus series schedd's services expose, read from their metric definitions
(``services/*/metrics.py``: every ``Counter``, ``Gauge``, ``Histogram`` and ``Summary`` created
with a literal name, and every ``GaugeMetricFamily`` and ``CounterMetricFamily`` a collector yields
at scrape time), and a check that PromQL written elsewhere (the dashboard, the autoscalers)
names only those series.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable

from tests.deploy.cli_surface import ROOT

_SUFFIXES = {
    "Counter": ("_total", "_created"),
    "Gauge": ("",),
    "Histogram": ("_bucket", "_sum", "_count", "_created"),
    "Summary": ("", "_sum", "_count", "_created"),
    "GaugeMetricFamily": ("",),
    "CounterMetricFamily": ("_total", "_created"),
}
_SERIES = re.compile(r"\bschedd_[a-z0-9_]*[a-z0-9]\b")


@functools.cache
def exposed_series() -> frozenset[str]:
    names: set[str] = set()
    for path in sorted((ROOT / "services").glob("*/metrics.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            kind = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            if kind in _SUFFIXES and isinstance(first, ast.Constant) and isinstance(first.value, str):
                base = first.value.removesuffix("_total") if kind.startswith("Counter") else first.value
                names.update(base + suffix for suffix in _SUFFIXES[kind])
    return frozenset(names)


def check_series(where: str, expressions: Iterable[str]) -> list[str]:
    exposed = exposed_series()
    return [
        f"{where}: {name} is not a series schedd exposes"
        for expression in expressions
        for name in _SERIES.findall(expression)
        if name not in exposed
    ]


def dashboard_expressions(dashboard: dict[str, object]) -> list[str]:
    """Every PromQL expression of a Grafana dashboard: panel targets and templating queries."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(dashboard)
    return found
