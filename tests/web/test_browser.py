"""The web UI in a real browser against a real cluster, as the people who watch pipelines use it:
sign-in, the trigger form, live runs in the grid and on the run page, a streamed log, clearing,
marking and cancelling, and a mapped task in the grid.

Pages are never reloaded where a test says "live": a marker set in the page's ``window`` is still
there at the end, which a reload would have wiped. With ``SCHEDD_UI_SCREENSHOTS=1`` the tests save
a screenshot of every view under ``docs/ui/`` (what docs/ui.md shows).
"""

from __future__ import annotations

import urllib.parse

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from schedd.v1 import api_pb2
from tests.web.browsing import (
    PARAMS_DAG,
    assert_same_page,
    click_to_load,
    gated_dag,
    mark_page,
    open_gate,
    shot,
    sign_in,
    task_path,
    text_of,
    wait,
)
from tests.web.conftest import WebStack

pytestmark = pytest.mark.e2e


def test_sign_in_refuses_a_bad_token_and_signing_out_ends_the_session(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A wrong token is refused at its field; the right one opens the DAGs list with the role the api
    gave it; the session cookie is HttpOnly and SameSite=Strict (no script sees it); signing out
    forgets the session, so the old cookie opens nothing."""
    web_stack.register(PARAMS_DAG)
    driver.delete_all_cookies()
    driver.get(f"{web_stack.url}/dags")
    assert "/signin" in driver.current_url
    driver.find_element(By.ID, "token").send_keys("sdt_000000000000_" + "x" * 43)
    shot(driver, "signin")
    click_to_load(driver, By.ID, "signin")
    assert "does not accept" in text_of(driver, "token-error")

    sign_in(driver, web_stack, web_stack.admin_token)
    assert text_of(driver, "role") == "admin" and text_of(driver, "principal").startswith("admin-")
    cookie = driver.get_cookie("schedd_session")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "schedd_session" not in driver.execute_script("return document.cookie;")

    old = cookie["value"]
    click_to_load(driver, By.ID, "signout")
    wait(driver, "the sign-in page", lambda d: "/signin" in d.current_url)
    driver.add_cookie({"name": "schedd_session", "value": old, "path": "/"})
    driver.get(f"{web_stack.url}/dags")
    assert "/signin" in driver.current_url


def test_trigger_form_shows_the_apis_refusal_at_its_field_then_triggers(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """The form is made from the DAG's typed params (defaults filled in, an enum as a choice); a
    value the api refuses (below the schema's minimum) is shown next to its field with the api's
    message and no run is made; a good value triggers a run whose conf has it, and the run page
    follows it to success live."""
    web_stack.register(PARAMS_DAG)
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_params/trigger")
    rows = driver.find_element(By.ID, "param-rows")
    assert rows.get_attribute("value") == "5"
    assert [o.text for o in Select(driver.find_element(By.ID, "param-mode")).options] == [
        "(default)",
        '"fast"',
        '"slow"',
    ]
    rows.clear()
    rows.send_keys("0")
    click_to_load(driver, By.ID, "trigger")
    error = text_of(driver, "error-rows")
    assert error.startswith("conf.rows:") and "minimum" in error, error
    shot(driver, "trigger")
    listed = web_stack.call(web_stack.runs.ListRuns, api_pb2.ListRunsRequest(parent="dags/web_params"))
    assert isinstance(listed, api_pb2.ListRunsResponse) and not listed.runs

    rows = driver.find_element(By.ID, "param-rows")
    rows.clear()
    rows.send_keys("3")
    Select(driver.find_element(By.ID, "param-mode")).select_by_visible_text('"slow"')
    click_to_load(driver, By.ID, "trigger")
    wait(driver, "the run page", lambda d: "/runs/" in d.current_url)
    mark_page(driver)
    conf = text_of(driver, "conf")
    assert '"rows": 3' in conf and '"mode": "slow"' in conf, conf
    wait(driver, "the run's success", lambda d: text_of(d, "run-state").endswith("success"))
    assert_same_page(driver)


def test_a_running_tasks_log_streams_live(web_stack: WebStack, driver: webdriver.Chrome) -> None:
    """The task page streams the log of a running task: its first line shows while the task still
    waits, and the rest arrives on the same page once it goes on, until the try's end."""
    web_stack.register(gated_dag(web_stack))
    run = web_stack.trigger("web_gated")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(web_stack.url + task_path(run, "wait"))
    mark_page(driver)
    wait(driver, "the first log line", lambda d: "waiting for the gate" in text_of(d, "log"))
    assert "gate opened" not in text_of(driver, "log")
    assert driver.find_element(By.ID, "log").get_attribute("data-ended") is None
    shot(driver, "task")
    open_gate(web_stack, run)
    wait(driver, "the log's end", lambda d: d.find_element(By.ID, "log").get_attribute("data-ended") == "1")
    log = text_of(driver, "log")
    assert log.index("waiting for the gate") < log.index("gate opened"), log
    assert_same_page(driver)


def test_the_grid_follows_a_run_to_success_live(web_stack: WebStack, driver: webdriver.Chrome) -> None:
    """The grid shows a running run's cells change to success without a reload, each state with
    its own glyph; the graph then shows the run's tasks, upstream first, in their states."""
    web_stack.register(gated_dag(web_stack))
    run = web_stack.trigger("web_gated")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_gated/grid")
    mark_page(driver)

    def last_cell(d: webdriver.Chrome, task: str) -> str:
        script = (
            "const c = document.querySelectorAll(arguments[0]); "
            "return c.length ? c[c.length - 1].dataset.state : '';"
        )
        return str(d.execute_script(script, f"tr[data-task='{task}'] a.cell"))

    def last_run_state(d: webdriver.Chrome) -> str:
        return str(
            d.execute_script("return [...document.querySelectorAll('a.run-head')].pop().dataset.state;")
        )

    assert last_cell(driver, "wait") in ("running", "queued", "scheduled")
    assert last_run_state(driver) in ("queued", "running")
    open_gate(web_stack, run)
    wait(driver, "the grid's success", lambda d: last_cell(d, "after") == "success")
    wait(driver, "the run's success", lambda d: last_run_state(d) == "success")
    assert driver.find_elements(By.CSS_SELECTOR, "tr[data-task='wait'] a.cell")[-1].text == "✓"
    assert_same_page(driver)
    shot(driver, "grid")
    click_to_load(driver, By.ID, "graph-link")
    states = (
        "return [...document.querySelectorAll('#graph g.node')]"
        ".map(g => g.dataset.task + ':' + g.dataset.state);"
    )
    assert driver.execute_script(states) == ["wait:success", "after:success"]
    shot(driver, "graph")


def test_clearing_a_failed_task_says_how_many_and_runs_it_again(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """Clearing a failed task with its downstream first asks, naming how many task instances it
    changes (the failed one and the one it failed upstream); after the confirmation the run page
    says how many were cleared and follows the task's second try to success live."""
    marker = f"{web_stack.gates}/flaky-$SCHEDD_RUN_ID"
    flaky = f'if test -f "{marker}"; then echo second try; else touch "{marker}"; echo failing; exit 1; fi'
    web_stack.register(
        {
            "dag_id": "web_flaky",
            "tasks": [
                {"task_id": "flaky", "shell": {"command": flaky}},
                {"task_id": "after", "upstream": ["flaky"], "shell": {"command": "echo after"}},
            ],
        }
    )
    run = web_stack.trigger("web_flaky")
    sign_in(driver, web_stack, web_stack.admin_token)
    run_path = f"/dags/web_flaky/runs/{urllib.parse.quote(run.run_id, safe='')}"
    driver.get(web_stack.url + run_path)
    wait(driver, "the run's failure", lambda d: text_of(d, "run-state").endswith("failed"))
    click_to_load(driver, By.CSS_SELECTOR, "tr[data-task='flaky'] a.clear")
    assert text_of(driver, "count") == "2"
    assert "flaky" in text_of(driver, "changed") and "after" in text_of(driver, "changed")
    shot(driver, "confirm-clear")
    click_to_load(driver, By.ID, "confirm")
    wait(driver, "the run page", lambda d: d.current_url.endswith(f"{run_path}?done=clear&n=2"))
    assert text_of(driver, "done") == "Cleared 2 task instances."
    mark_page(driver)
    wait(driver, "the run's success", lambda d: text_of(d, "run-state").endswith("success"))
    assert_same_page(driver)
    shot(driver, "run")
    flaky_row = driver.find_element(By.CSS_SELECTOR, "tr[data-task='flaky']").text
    assert "success" in flaky_row and "2/" in flaky_row, flaky_row
    bars = "return [...document.querySelectorAll('#gantt g.bar')].map(g => g.dataset.task).sort();"
    assert driver.execute_script(bars) == ["after", "flaky"]


def test_marking_a_task_and_cancelling_a_run_ask_first_and_say_how_many(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """Marking a running task succeeded asks first (one task instance) and lets the run go on to
    success; cancelling a run asks first, naming the task instances it stops or skips, and fails
    the run as cancelled."""
    web_stack.register(gated_dag(web_stack))
    sign_in(driver, web_stack, web_stack.admin_token)
    marked = web_stack.trigger("web_gated")
    driver.get(web_stack.url + task_path(marked, "wait").rsplit("/tasks/", 1)[0])
    wait(driver, "the task to run", lambda d: "running" in text_of(d, "task-wait"))
    click_to_load(driver, By.CSS_SELECTOR, "tr[data-task='wait'] a.mark-success")
    assert text_of(driver, "count") == "1" and "wait" in text_of(driver, "changed")
    click_to_load(driver, By.ID, "confirm")
    assert text_of(driver, "done") == "Marked 1 task instance."
    wait(driver, "the run's success", lambda d: text_of(d, "run-state").endswith("success"))

    cancelled = web_stack.trigger("web_gated")
    driver.get(web_stack.url + task_path(cancelled, "wait").rsplit("/tasks/", 1)[0])
    wait(driver, "the task to run", lambda d: "running" in text_of(d, "task-wait"))
    click_to_load(driver, By.ID, "cancel-run")
    assert text_of(driver, "count") == "2", text_of(driver, "confirm-text")
    click_to_load(driver, By.ID, "confirm")
    assert text_of(driver, "done") == "Cancelled the run."
    wait(driver, "the run's end", lambda d: text_of(d, "run-state").endswith("failed"))
    assert web_stack.get_run(cancelled.name).cancelled
    open_gate(web_stack, cancelled)  # nothing waits for it any more; the worker stopped the task


def test_a_mapped_task_is_one_grid_row_counting_its_instances(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A task mapped over three values is one row of the grid whose cell counts its instances by
    state (``3✓`` once they all succeeded), drawn as a pill; the run page lists each instance."""
    web_stack.register(
        {
            "dag_id": "web_mapped",
            "tasks": [
                {
                    "task_id": "each",
                    "python": {"target": "tests.web.web_tasks:square"},
                    "mapping": {"expand": [{"name": "x", "values": {"literal": [1, 2, 3]}}]},
                }
            ],
        }
    )
    run = web_stack.trigger("web_mapped")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_mapped/grid")
    cell = "const c = document.querySelector(arguments[0]); return c ? c.textContent : '';"
    wait(
        driver,
        "three successful instances",
        lambda d: d.execute_script(cell, "tr[data-task='each'] a.cell.mapped") == "3✓",
    )
    driver.get(web_stack.url + task_path(run, "each").rsplit("/tasks/", 1)[0])
    rows = "return [...document.querySelectorAll('table.tis tr[data-task]')].map(r => r.dataset.task);"
    assert driver.execute_script(rows) == ["each[0]", "each[1]", "each[2]"]
