"""The assets page of the web UI in a real browser: lineage (what updates an asset, which DAGs are
scheduled on it, what reads it) and an asset's events with the runs that consumed them, shown as
text: a URI or an extra holding markup is data, never markup."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2
from selenium import webdriver
from selenium.webdriver.common.by import By

from schedd.v1 import assets_pb2 as apb, assets_pb2_grpc
from schedd_rpc.tls import token_metadata
from tests.polling import wait_until
from tests.web.browsing import click_to_load, shot, sign_in, text_of
from tests.web.conftest import WebStack

pytestmark = pytest.mark.e2e

HOSTILE = "s3://web/<b>bold</b>"


def emit(stack: WebStack, uri: str, extra: dict[str, str]) -> apb.AssetEvent:
    with grpc.insecure_channel(stack.cluster.api_address) as channel:
        request = apb.CreateAssetEventRequest(uri=uri, extra=struct_pb2.Struct())
        request.extra.update(extra)
        event: apb.AssetEvent = assets_pb2_grpc.AssetServiceStub(channel).CreateAssetEvent(
            request, timeout=30, metadata=token_metadata(stack.admin_token)
        )
    return event


def test_the_assets_page_shows_lineage_and_events_as_text(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    web_stack.register(
        {
            "dag_id": "web_asset_consumer",
            "asset_schedule": {"asset": {"uri": HOSTILE}},
            "tasks": [{"task_id": "t", "shell": {"command": "true"}}],
        }
    )
    web_stack.register(
        {
            "dag_id": "web_asset_producer",
            "tasks": [
                {
                    "task_id": "make",
                    "shell": {"command": "true"},
                    "outlets": [{"uri": HOSTILE}],
                    "inlets": [{"uri": "s3://web/source"}],
                }
            ],
        }
    )
    event = emit(web_stack, HOSTILE, {"note": "<img src=x onerror=alert(1)>"})
    wait_until(
        "the run the event triggers",
        lambda: web_stack.cluster.fetchval(
            "SELECT count(*) FROM asset_event_consumptions WHERE event_id = $1", event.id
        ),
        30,
    )
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/assets?prefix=s3://web/")
    row = driver.find_element(By.CSS_SELECTOR, "#assets tbody tr")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:4] == [HOSTILE, "web_asset_producer.make", "web_asset_consumer", "\u2013"], cells
    assert not driver.find_elements(By.CSS_SELECTOR, "#assets b"), "a URI was rendered as markup"
    source = driver.find_elements(By.CSS_SELECTOR, "#assets tbody tr")[1]
    assert "web_asset_producer.make" in source.find_element(By.CLASS_NAME, "readers").text
    shot(driver, "assets")
    click_to_load(driver, By.LINK_TEXT, HOSTILE)
    assert text_of(driver, "asset-uri") == HOSTILE
    events = driver.find_element(By.CSS_SELECTOR, f"#events tr[data-event='{event.id}']")
    assert "<img src=x onerror=alert(1)>" in events.find_element(By.CLASS_NAME, "extra").text
    assert not driver.find_elements(By.CSS_SELECTOR, "#events img")
    consumed = events.find_element(By.CLASS_NAME, "consumed").text
    assert consumed.startswith("dags/web_asset_consumer/runs/asset_triggered__"), consumed
    shot(driver, "asset-events")
