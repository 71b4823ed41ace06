"""The assets pages' templates without a browser or a cluster: lineage and events are rendered as
escaped text (a URI or an extra holding markup is data), with links to the DAGs and runs."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request
from google.protobuf.struct_pb2 import Struct

from schedd.v1 import assets_pb2 as apb
from schedd_web.app import make_app
from schedd_web.base import render_text
from schedd_web.config import WebConfig

HOSTILE = "s3://web/<script>alert(1)</script>"


def page(template: str, **context: object) -> str:
    app = make_app(WebConfig.from_env({}, listen="127.0.0.1:0", api="127.0.0.1:1", metrics_listen=""))
    return render_text(make_mocked_request("GET", "/assets", app=app), template, **context)


def test_the_assets_page_shows_lineage_as_escaped_text() -> None:
    asset = apb.Asset(
        uri=HOSTILE,
        producers=[apb.TaskRef(dag_id="load", task_id="write")],
        scheduled_dags=["report"],
        readers=[apb.TaskRef(dag_id="audit", task_id="read")],
    )
    html = page("assets.html", assets=[asset], prefix="", more=False)
    assert "<script>alert" not in html
    assert "s3://web/&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<a href="/dags/load/grid">load</a>.write' in html
    assert '<a href="/dags/report/grid">report</a>' in html
    assert '<a href="/dags/audit/grid">audit</a>.read' in html
    assert "/assets/events?uri=s3%3A//web/%3Cscript%3E" in html


def test_the_events_page_shows_sources_extras_and_consuming_runs() -> None:
    extra = Struct()
    extra.update({"note": "<img src=x onerror=alert(1)>"})
    events = [
        apb.AssetEvent(
            id=7,
            uri=HOSTILE,
            extra=extra,
            source="task",
            source_dag_id="load",
            source_run_id="r1",
            source_task_id="write",
            consumed_by=["dags/report/runs/asset_triggered__2026-01-01T00.00.00Z"],
        ),
        apb.AssetEvent(id=8, uri=HOSTILE, source="watcher", source_watcher="orders"),
    ]
    html = page("asset_events.html", uri=HOSTILE, asset=None, events=events)
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert '<a href="/dags/load/runs/r1">load / r1</a> · write' in html
    assert 'href="/dags/report/runs/asset_triggered__2026-01-01T00.00.00Z"' in html
    assert "<td>orders</td>" in html
