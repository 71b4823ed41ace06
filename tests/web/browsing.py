"""What the browser tests share: waiting for pages, signing in, screenshots for docs/ui.md, and
the DAGs they run."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from schedd.v1 import resources_pb2 as pb
from tests.web.conftest import WebStack

WAIT_SECONDS = 60.0
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"


def shot(driver: webdriver.Chrome, name: str) -> None:
    """A screenshot of the page for docs/ui.md, when ``SCHEDD_UI_SCREENSHOTS`` asks for them."""
    if os.environ.get("SCHEDD_UI_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def wait(driver: webdriver.Chrome, what: str, condition: Callable[[webdriver.Chrome], object]) -> None:
    WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.1).until(condition, f"timed out waiting for {what}")


def click_to_load(driver: webdriver.Chrome, by: str, value: str) -> None:
    """Click what navigates (a link, a form's button) and wait until the next page has loaded."""
    driver.execute_script("window.__old_page = true;")

    def click(d: webdriver.Chrome) -> bool:
        try:
            d.find_element(by, value).click()
        except StaleElementReferenceException:  # a live update replaced it: find it again
            return False
        return True

    wait(driver, f"a click on {value}", click)
    wait(
        driver,
        f"the page after clicking {value}",
        lambda d: d.execute_script(
            "return window.__old_page === undefined && document.readyState === 'complete';"
        ),
    )


def sign_in(driver: webdriver.Chrome, stack: WebStack, token: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"{stack.url}/signin")
    driver.find_element(By.ID, "token").send_keys(token)
    click_to_load(driver, By.ID, "signin")
    wait(driver, "the DAGs list", lambda d: d.current_url.endswith("/dags"))


def text_of(driver: webdriver.Chrome, element_id: str) -> str:
    """The element's text, read in one step (live fragments replace elements at any time); empty
    when there is no such element."""
    script = "const e = document.getElementById(arguments[0]); return e ? e.textContent : '';"
    return str(driver.execute_script(script, element_id)).strip()


def mark_page(driver: webdriver.Chrome) -> None:
    driver.execute_script("window.__same_page = true;")


def assert_same_page(driver: webdriver.Chrome) -> None:
    assert driver.execute_script("return window.__same_page === true;"), "the page was reloaded"


def gated_dag(stack: WebStack) -> dict[str, Any]:
    gate = f"{stack.gates}/$SCHEDD_RUN_ID"
    wait_for_gate = (
        f'echo waiting for the gate; for i in $(seq 1 600); do test -f "{gate}" && break; sleep 0.1; done; '
        "echo gate opened"
    )
    return {
        "dag_id": "web_gated",
        "description": "A task that waits for a file the test writes.",
        "tasks": [
            {"task_id": "wait", "shell": {"command": wait_for_gate}},
            {"task_id": "after", "upstream": ["wait"], "shell": {"command": "echo after"}},
        ],
    }


def open_gate(stack: WebStack, run: pb.DagRun) -> None:
    (stack.gates / run.run_id).touch()


PARAMS_DAG = {
    "dag_id": "web_params",
    "description": "Typed params.",
    "params": {"rows": 5, "mode": "fast"},
    "param_schemas": {
        "rows": {"type": "integer", "minimum": 1, "description": "how many rows"},
        "mode": {"enum": ["fast", "slow"]},
    },
    "tasks": [{"task_id": "show", "shell": {"command": "echo params: $SCHEDD_PARAMS"}}],
}


def task_path(run: pb.DagRun, key: str) -> str:
    return f"/dags/{run.dag_id}/runs/{urllib.parse.quote(run.run_id, safe='')}/tasks/{key}"
