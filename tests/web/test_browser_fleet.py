"""Backfills and the cluster page of the web UI in a real browser."""

from __future__ import annotations

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from schedd.v1 import api_pb2
from tests.web.browsing import click_to_load, shot, sign_in, text_of, wait
from tests.web.conftest import WebStack

pytestmark = pytest.mark.e2e


def test_a_backfill_is_previewed_created_paused_resumed_and_cancelled(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """The backfill form refuses a value it cannot read at its field, and shows the api's refusal
    (an end before the start) at the field the api names; its preview is the api's dry run (five
    daily intervals for five days); the backfill it creates can be paused, resumed and, after a
    confirmation naming the runs in flight, cancelled."""
    web_stack.register(
        {
            "dag_id": "web_daily",
            "schedule": "@daily",
            "start_date": "2024-01-01T00:00:00Z",
            "tasks": [{"task_id": "t", "shell": {"command": "echo $SCHEDD_LOGICAL_DATE"}}],
        }
    )
    # Paused: the backfill's runs wait, so its state stays put while the test drives it.
    web_stack.call(web_stack.dags.PauseDag, api_pb2.PauseDagRequest(name="dags/web_daily"))
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_daily/grid")
    click_to_load(driver, By.ID, "backfill")

    def fill(start: str, end: str, max_active_runs: str) -> None:
        for name, value in (("start", start), ("end", end), ("max_active_runs", max_active_runs)):
            element = driver.find_element(By.ID, name)
            element.clear()
            element.send_keys(value)
        click_to_load(driver, By.ID, "preview")

    fill("2024-01-01", "2024-01-05", "0")
    assert "at least 1" in text_of(driver, "error-max_active_runs")
    fill("2024-01-05", "2024-01-01", "2")
    assert text_of(driver, "error-end").startswith("backfill.end_date:"), text_of(driver, "error-end")
    fill("2024-01-01", "2024-01-05", "2")
    assert text_of(driver, "count") == "5", driver.find_element(By.TAG_NAME, "main").text
    assert text_of(driver, "intervals").startswith("2024-01-01 00:00:00Z")
    shot(driver, "backfill-preview")
    click_to_load(driver, By.ID, "confirm")
    wait(driver, "the backfill's page", lambda d: "/backfills/" in d.current_url)
    assert text_of(driver, "backfill-state") == "running"
    click_to_load(driver, By.CSS_SELECTOR, "button.backfill-pause")
    wait(driver, "the pause", lambda d: text_of(d, "backfill-state") == "paused")
    click_to_load(driver, By.CSS_SELECTOR, "button.backfill-resume")
    wait(driver, "the resume", lambda d: text_of(d, "backfill-state") == "running")
    shot(driver, "backfill")
    click_to_load(driver, By.CSS_SELECTOR, "a.backfill-cancel")
    assert "runs in flight" in text_of(driver, "confirm-text") or "run in flight" in text_of(
        driver, "confirm-text"
    )
    click_to_load(driver, By.ID, "confirm")
    wait(driver, "the cancellation", lambda d: text_of(d, "backfill-state") == "cancelled")
    driver.get(f"{web_stack.url}/backfills?dag=web_daily")
    assert "cancelled" in text_of(driver, "backfills")
    driver.get(f"{web_stack.url}/dags")
    shot(driver, "dags")


def test_the_cluster_page_shows_the_leader_workers_and_pools(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """The leading scheduler with its fencing token, the connected worker and the default pool."""
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/cluster")
    leader = web_stack.cluster.leader()
    assert leader is not None
    assert any(identity in text_of(driver, "leader") for identity in web_stack.cluster.schedulers)
    assert "fencing token" in text_of(driver, "leader")
    worker = driver.find_element(By.CSS_SELECTOR, "tr[data-worker='worker-1']").text
    assert "active" in worker, worker
    assert driver.find_elements(By.CSS_SELECTOR, "tr[data-pool='default_pool']")
    shot(driver, "cluster")
