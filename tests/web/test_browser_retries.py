"""Clearing with everything upstream on the DAG's latest version, and a task's log following it
from one try to the next, in a real browser."""

from __future__ import annotations

import urllib.parse

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from schedd.v1 import api_pb2, resources_pb2 as pb
from tests.web.browsing import (
    assert_same_page,
    click_to_load,
    mark_page,
    shot,
    sign_in,
    task_path,
    text_of,
    wait,
)
from tests.web.conftest import WebStack

pytestmark = pytest.mark.e2e


def fixable_dag(work: str) -> dict[str, object]:
    return {
        "dag_id": "web_fixable",
        "tasks": [
            {"task_id": "prepare", "shell": {"command": "echo prepared"}},
            {"task_id": "work", "upstream": ["prepare"], "shell": {"command": work}},
        ],
    }


def test_a_failed_task_cleared_with_upstream_on_the_latest_version_runs_the_fixed_code(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A run fails on a broken task; a fixed version of the DAG is registered; clearing the task
    with everything upstream and "run on the latest version" asks first, naming both task
    instances, then moves the run to the new version, where the task runs the fixed code and the
    run succeeds."""
    web_stack.register(fixable_dag("echo broken; exit 3"))
    run = web_stack.trigger("web_fixable")
    sign_in(driver, web_stack, web_stack.admin_token)
    run_path = f"/dags/web_fixable/runs/{urllib.parse.quote(run.run_id, safe='')}"
    driver.get(web_stack.url + run_path)
    wait(driver, "the run's failure", lambda d: text_of(d, "run-state").endswith("failed"))
    web_stack.register(fixable_dag("echo fixed"))
    dag = web_stack.call(web_stack.dags.GetDag, api_pb2.GetDagRequest(name="dags/web_fixable"))
    assert isinstance(dag, pb.Dag) and dag.latest_version != run.dag_version

    driver.get(web_stack.url + task_path(run, "work"))
    click_to_load(driver, By.ID, "clear-task")
    assert text_of(driver, "count") == "1"
    for option in ("upstream", "latest"):
        driver.find_element(By.CSS_SELECTOR, f"form.options input[name='{option}']").click()
    click_to_load(driver, By.CSS_SELECTOR, "form.options button[type=submit]")
    assert text_of(driver, "count") == "2", text_of(driver, "confirm-text")
    assert "prepare" in text_of(driver, "changed") and "work" in text_of(driver, "changed")
    shot(driver, "confirm-clear-upstream")
    click_to_load(driver, By.ID, "confirm")
    wait(driver, "the run page", lambda d: d.current_url.endswith(f"{run_path}?done=clear&n=2"))
    mark_page(driver)
    wait(driver, "the run's success", lambda d: text_of(d, "run-state").endswith("success"))
    assert_same_page(driver)
    assert web_stack.get_run(run.name).dag_version == dag.latest_version
    driver.get(web_stack.url + task_path(run, "work"))
    wait(driver, "the log", lambda d: d.find_element(By.ID, "log").get_attribute("data-ended") == "1")
    assert "fixed" in text_of(driver, "log") and "broken" not in text_of(driver, "log")


def test_the_log_follows_a_task_from_its_failed_try_to_the_next(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """While the task page streams try 1, the try fails (it waited for a gate file); a tab for try 2
    then appears on the same page and streams try 2's log to its end."""
    gate = f"{web_stack.gates}/retry-$SCHEDD_RUN_ID"
    marker = f"{web_stack.gates}/retried-$SCHEDD_RUN_ID"
    command = (
        f'if test -f "{marker}"; then echo second try; exit 0; fi; touch "{marker}"; echo first try; '
        f'for i in $(seq 1 600); do test -f "{gate}" && break; sleep 0.1; done; echo giving up; exit 1'
    )
    web_stack.register(
        {
            "dag_id": "web_retrying",
            "tasks": [{"task_id": "flaky", "retries": 1, "retry_delay": "1s", "shell": {"command": command}}],
        }
    )
    run = web_stack.trigger("web_retrying")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(web_stack.url + task_path(run, "flaky"))
    mark_page(driver)
    wait(driver, "try 1's first line", lambda d: "first try" in text_of(d, "log"))
    assert not driver.find_elements(By.CSS_SELECTOR, "#tries a[data-try='2']")
    (web_stack.gates / f"retry-{run.run_id}").touch()
    wait(
        driver,
        "a tab for try 2",
        lambda d: d.find_elements(By.CSS_SELECTOR, "#tries a[data-try='2'].current"),
    )
    wait(driver, "try 2's log", lambda d: "second try" in text_of(d, "log"))
    wait(driver, "try 2's end", lambda d: d.find_element(By.ID, "log").get_attribute("data-ended") == "1")
    assert "first try" not in text_of(driver, "log")
    assert "try 2" in text_of(driver, "log-status")
    assert_same_page(driver)
    shot(driver, "task-retry")
