"""The grid at scale in a real browser: 25 runs of a 200-task DAG render within a second, a mapped
task of 1,000 instances opens a page at a time, older runs are paged, and a run made after the
grid was opened appears on it without a reload.

The runs are made fast and never execute: their tasks go to a queue no worker serves, and each run
is cancelled once the scheduler made its task instances (so they are skipped). Render times are
read from the browser's Navigation Timing entry and printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from schedd.v1 import api_pb2, resources_pb2 as pb
from tests.web.browsing import WAIT_SECONDS, assert_same_page, click_to_load, mark_page, shot, sign_in, wait
from tests.web.conftest import WebStack

pytestmark = pytest.mark.e2e

#: A queue no worker of the test cluster serves: tasks sent there wait until cancelled.
NOWHERE = "web-nowhere"
#: A page that takes longer than this froze. The render times themselves are printed (the target
#: is under 1 s for the grid, measured on a quiet machine); a shared CI machine is no place to
#: assert a speed, so the bound only catches a page that stops rendering in reasonable time.
GRID_BOUND_MS = 5000.0
MAPPED_BOUND_MS = 5000.0

NAVIGATION = """
const n = performance.getEntriesByType('navigation')[0];
return {response: n.responseEnd, interactive: n.domInteractive, loaded: n.domContentLoadedEventEnd,
        cells: document.querySelectorAll('table.grid a.cell').length};
"""


def wide_dag(dag_id: str, tasks: int) -> dict[str, Any]:
    """``tasks`` no-op tasks in a binary tree (each after the one at half its index), all waiting on
    :data:`NOWHERE`."""
    return {
        "dag_id": dag_id,
        "max_active_runs": 100,
        "tasks": [
            {
                "task_id": f"t{i:03d}",
                "queue": NOWHERE,
                "upstream": [f"t{(i - 1) // 2:03d}"] if i else [],
                "shell": {"command": "true"},
            }
            for i in range(tasks)
        ],
    }


def planned_and_cancelled(stack: WebStack, dag_id: str, runs: int, instances: int) -> list[pb.DagRun]:
    """``runs`` new runs of the DAG, each cancelled once it has ``instances`` task instances."""
    made = [stack.trigger(dag_id) for _ in range(runs)]
    deadline = time.monotonic() + WAIT_SECONDS
    pending = list(made)
    while pending:
        assert time.monotonic() < deadline, f"{len(pending)} runs of {dag_id} were never planned"
        planned = [r for r in pending if len(stack.get_run(r.name).task_instances) >= instances]
        for run in planned:
            stack.call(stack.runs.CancelRun, api_pb2.CancelRunRequest(name=run.name))
        pending = [r for r in pending if r not in planned]
        if pending:
            time.sleep(0.2)
    return made


def test_a_grid_of_25_runs_of_200_tasks_renders_within_a_second(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """25 runs x 200 tasks: the grid (``?runs=25``) is in the DOM, with its 5,000 cells, within a
    second of navigation start, as the browser's Navigation Timing measures it."""
    web_stack.register(wide_dag("web_wide", 200))
    planned_and_cancelled(web_stack, "web_wide", 25, 200)
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_wide/grid?runs=25")  # static files now cached
    timings = []
    for _ in range(3):
        driver.get(f"{web_stack.url}/dags/web_wide/grid?runs=25")
        timing = driver.execute_script(NAVIGATION)
        assert timing["cells"] == 25 * 200, timing
        timings.append(timing)
    best = min(t["loaded"] for t in timings)
    print(
        f"\ngrid of 25 runs x 200 tasks in the DOM after {best:.0f} ms (best of "
        + "; ".join(f"{t['loaded']:.0f} ms, HTML received at {t['response']:.0f} ms" for t in timings)
        + ")"
    )
    # The best of three: other work on the machine only ever adds time.
    assert 0 < best < GRID_BOUND_MS, timings
    shot(driver, "grid-wide")


def test_a_mapped_task_of_1000_instances_opens_a_page_at_a_time(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A task mapped over 1,000 values is one grid cell counting them; it opens a page of 100
    instances with the count of each state, quickly, and pages on to the next 100."""
    web_stack.register(
        {
            "dag_id": "web_map1000",
            "tasks": [
                {
                    "task_id": "each",
                    "queue": NOWHERE,
                    "python": {"target": "tests.web.web_tasks:square"},
                    "mapping": {"expand": [{"name": "x", "values": {"literal": list(range(1000))}}]},
                }
            ],
        }
    )
    planned_and_cancelled(web_stack, "web_map1000", 1, 1000)
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_map1000/grid")
    assert driver.find_element(By.CSS_SELECTOR, "tr[data-task='each'] a.cell.mapped").text == "1000↷"
    click_to_load(driver, By.CSS_SELECTOR, "tr[data-task='each'] a.cell.mapped")
    timing = driver.execute_script(NAVIGATION)
    print(f"\nmapped task of 1,000 instances, first page: {timing['loaded']:.0f} ms")
    assert timing["loaded"] < MAPPED_BOUND_MS, timing
    rows = "return [...document.querySelectorAll('#instances tr[data-task]')].map(r => r.dataset.task);"
    assert driver.execute_script(rows) == [f"each[{i}]" for i in range(100)]
    assert driver.find_element(By.ID, "total").text == "1000"
    assert "1000 skipped" in driver.find_element(By.ID, "mapped-summary").text
    shot(driver, "mapped")
    click_to_load(driver, By.ID, "next-page")
    assert driver.execute_script(rows) == [f"each[{i}]" for i in range(100, 200)]
    assert driver.find_element(By.ID, "page-number").text == "page 2 of 10"


def test_older_runs_are_paged_and_a_new_run_appears_without_a_reload(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """The grid shows the newest 20 runs; "older" shows the 3 before them, "newer" returns. On the
    newest page, a run triggered after the page was opened appears as a new column (rightmost)
    without a reload, and the grid then follows it to its end."""
    web_stack.register(wide_dag("web_paged", 2))
    made = planned_and_cancelled(web_stack, "web_paged", 23, 2)
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_paged/grid")
    heads = "return [...document.querySelectorAll('a.run-head')].map(a => a.title.split(':')[0]);"
    assert driver.execute_script(heads) == [r.run_id for r in made[3:]]
    click_to_load(driver, By.ID, "older-runs")
    assert driver.execute_script(heads) == [r.run_id for r in made[:3]]
    assert not driver.find_elements(By.ID, "older-runs")
    click_to_load(driver, By.ID, "newer-runs")
    assert driver.execute_script(heads) == [r.run_id for r in made[3:]]

    mark_page(driver)
    new = web_stack.trigger("web_paged")
    wait(driver, "the new run's column", lambda d: d.execute_script(heads)[-1:] == [new.run_id])
    assert driver.execute_script(heads) == [r.run_id for r in made[4:]] + [new.run_id]
    web_stack.call(web_stack.runs.CancelRun, api_pb2.CancelRunRequest(name=new.name))
    last_state = "return [...document.querySelectorAll('a.run-head')].pop().dataset.state;"
    wait(driver, "the new run's end", lambda d: d.execute_script(last_state) == "failed")
    assert_same_page(driver)
