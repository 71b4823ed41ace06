"""The web UI's views of a DAG's history in a real browser against a real cluster: the calendar of
runs by day with the next runs, the versions with a diff of any two (spec and code bundle), and the
run page's timeline of every try with the estimated end and critical path (also on the grid).

With ``SCHEDD_UI_SCREENSHOTS=1`` the tests save the screenshots docs/ui.md shows.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import json_format
from selenium import webdriver
from selenium.webdriver.common.by import By

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_rpc.tls import token_metadata
from tests.bundles import bundle_archive
from tests.web.browsing import assert_same_page, click_to_load, mark_page, shot, sign_in, text_of, wait
from tests.web.conftest import RPC_TIMEOUT, WebStack

pytestmark = pytest.mark.e2e

#: Seconds a run of these tests' DAGs may take to end.
RUN_SECONDS = 90.0
FINAL = (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED)


def _until(what: str, check: Callable[[], bool], seconds: float = RUN_SECONDS) -> None:
    """Poll ``check`` until it holds, failing after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _create(
    stack: WebStack, dag_id: str, run_id: str, when: datetime | None = None, **conf: str
) -> pb.DagRun:
    request = api_pb2.CreateRunRequest(parent=f"dags/{dag_id}", run_id=run_id)
    if when is not None:
        request.logical_date.FromDatetime(when)
    if conf:
        request.conf.update(conf)
    run = stack.call(stack.runs.CreateRun, request)
    assert isinstance(run, pb.DagRun)
    return run


def _ended(stack: WebStack, run: pb.DagRun) -> pb.DagRun:
    _until(f"run {run.run_id} to end", lambda: stack.get_run(run.name).state in FINAL)
    return stack.get_run(run.name)


def test_the_calendar_counts_runs_by_day_links_to_them_and_lists_the_next_runs(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """Two runs three days ago (one failed) and one today show as counts by state on their days,
    with glyphs; a day links to its runs and they to their pages; the next runs are the schedule's
    coming data intervals."""
    web_stack.register(
        {
            "dag_id": "web_hist_daily",
            "schedule": "@daily",
            "start_date": "2030-01-01T00:00:00Z",
            "params": {"fail": "no"},
            "tasks": [
                {"task_id": "t", "shell": {"command": 'case "$SCHEDD_PARAMS" in *yes*) exit 1;; esac'}}
            ],
        }
    )
    now = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    earlier = now - timedelta(days=3)
    runs = [
        _create(web_stack, "web_hist_daily", "early_ok", earlier),
        _create(web_stack, "web_hist_daily", "early_bad", earlier + timedelta(hours=1), fail="yes"),
        _create(web_stack, "web_hist_daily", "today_ok", now - timedelta(hours=11)),
    ]
    assert [_ended(web_stack, r).state for r in runs] == [
        pb.RUN_STATE_SUCCESS,
        pb.RUN_STATE_FAILED,
        pb.RUN_STATE_SUCCESS,
    ]
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/dags/web_hist_daily/grid")
    click_to_load(driver, By.ID, "calendar-link")
    day = driver.find_element(By.CSS_SELECTOR, f"td[data-day='{earlier.date().isoformat()}']")
    assert day.get_attribute("data-count") == "2" and day.get_attribute("data-state") == "failed"
    states = [(d.get_attribute("data-state"), d.text) for d in day.find_elements(By.CSS_SELECTOR, ".dot")]
    assert states == [("failed", "1✗"), ("success", "1✓")], states
    today = driver.find_element(By.CSS_SELECTOR, f"td[data-day='{now.date().isoformat()}']")
    assert today.get_attribute("data-count") == "1" and "1✓" in today.text
    empty = driver.find_element(
        By.CSS_SELECTOR, f"td[data-day='{(earlier - timedelta(days=1)).date().isoformat()}']"
    )
    assert empty.get_attribute("data-count") == "0" and not empty.find_elements(By.TAG_NAME, "a")
    upcoming = text_of(driver, "next-runs")
    assert "2030-01-01 00:00:00Z \u2013 2030-01-02 00:00:00Z" in upcoming, upcoming
    shot(driver, "calendar")

    click_to_load(driver, By.CSS_SELECTOR, f"td[data-day='{earlier.date().isoformat()}'] a.day-link")
    listed = [
        r.get_attribute("data-run") for r in driver.find_elements(By.CSS_SELECTOR, "#day-runs tr[data-run]")
    ]
    assert listed == ["early_bad", "early_ok"], listed
    click_to_load(driver, By.LINK_TEXT, "early_bad")
    assert driver.current_url.endswith("/dags/web_hist_daily/runs/early_bad")
    assert text_of(driver, "run-state").endswith("failed")

    driver.get(f"{web_stack.url}/dags/web_hist_daily/calendar?weeks=54")
    assert "weeks: must be a whole number from 1 to 53" in driver.find_element(By.TAG_NAME, "body").text


HOSTILE = "<script>window.__xss='diff'</script>"


def _register_bundled(stack: WebStack, channel: grpc.Channel, description: str, work: bytes) -> str:
    """A version of ``web_hist_coded`` whose bundle holds ``work.py`` and an unchanged file."""
    archive = bundle_archive({"work.py": work, "README.txt": b"unchanged\n"})
    sha256 = hashlib.sha256(archive).hexdigest()
    bundles = api_pb2_grpc.BundleServiceStub(channel)
    upload = iter([api_pb2.UploadBundleRequest(archive=archive, sha256=sha256)])
    bundles.UploadBundle(upload, timeout=RPC_TIMEOUT, metadata=token_metadata(stack.admin_token))
    spec = {
        "dag_id": "web_hist_coded",
        "description": description,
        "code_bundle": sha256,
        "tasks": [{"task_id": "step", "python": {"target": "work:step"}}],
    }
    parsed = json_format.ParseDict(spec, pb.DagSpec())
    done = stack.call(stack.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=parsed))
    assert isinstance(done, api_pb2.RegisterDagResponse)
    return done.version.version_hash


def test_versions_are_listed_and_any_two_are_diffed_as_text(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A viewer sees both versions, the newest marked current; the diff of the two shows the spec's
    changed description and the bundle file's changed line (markup in it shown as text, never run),
    and counts the unchanged file; the diff the other way round swaps the signs."""
    with grpc.insecure_channel(web_stack.cluster.api_address) as channel:
        old = _register_bundled(web_stack, channel, "first", b"def step():\n    return 1\n")
        new = _register_bundled(
            web_stack, channel, "second", f"def step():\n    return 2  # {HOSTILE}\n".encode()
        )
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/dags/web_hist_coded/grid")
    click_to_load(driver, By.ID, "versions-link")
    rows = [
        r.get_attribute("data-version")
        for r in driver.find_elements(By.CSS_SELECTOR, "#versions tr[data-version]")
    ]
    assert rows == [new, old]
    current = driver.find_element(By.CSS_SELECTOR, f"tr[data-version='{new}']")
    assert (
        "current" in current.text
        and "current" not in driver.find_element(By.CSS_SELECTOR, f"tr[data-version='{old}']").text
    )
    shot(driver, "versions")
    click_to_load(driver, By.ID, "compare")
    assert text_of(driver, "version-a") == old[:12] and text_of(driver, "version-b") == new[:12]
    spec_changes = [
        (e.get_attribute("class"), e.text.strip())
        for e in driver.find_elements(By.CSS_SELECTOR, "#spec-diff .add, #spec-diff .del")
    ]
    assert ("del", '-  "description": "first",') in spec_changes and (
        "add",
        '+  "description": "second",',
    ) in spec_changes, spec_changes
    section = driver.find_element(By.CSS_SELECTOR, "section.file-diff[data-path='work.py']")
    added = [e.text for e in section.find_elements(By.CSS_SELECTOR, ".add")]
    assert added == [f"+    return 2  # {HOSTILE}"], added
    assert [e.text for e in section.find_elements(By.CSS_SELECTOR, ".del")] == ["-    return 1"]
    assert text_of(driver, "files-summary") == "1 file differs, 1 the same."
    assert driver.execute_script("return window.__xss === undefined;"), "markup in a diff ran"
    shot(driver, "versions-diff")

    driver.get(f"{web_stack.url}/dags/web_hist_coded/versions/diff?a={new}&b={old}")
    section = driver.find_element(By.CSS_SELECTOR, "section.file-diff[data-path='work.py']")
    assert [e.text for e in section.find_elements(By.CSS_SELECTOR, ".add")] == ["+    return 1"]
    driver.get(f"{web_stack.url}/dags/web_hist_coded/versions/diff?a={old}&b={'0' * 64}")
    assert "NOT_FOUND" in driver.find_element(By.TAG_NAME, "h1").text
    driver.get(f"{web_stack.url}/dags/web_hist_coded/versions/diff?a={old}")
    assert "b: pick a version" in driver.find_element(By.TAG_NAME, "body").text


def _retried_dag(stack: WebStack) -> dict[str, object]:
    """flaky fails its first try in every run, then succeeds; slow waits for the run's gate file;
    last follows slow."""
    marker = f"{stack.gates}/flaky-$SCHEDD_RUN_ID"
    gate = f"{stack.gates}/$SCHEDD_RUN_ID"
    flaky = f'sleep 1; if [ -f "{marker}" ]; then echo second try; else touch "{marker}"; exit 1; fi'
    slow = f'for i in $(seq 1 600); do test -f "{gate}" && break; sleep 0.1; done; echo gate opened'
    return {
        "dag_id": "web_hist_retried",
        "tasks": [
            {"task_id": "flaky", "retries": 1, "retry_delay": "0.5s", "shell": {"command": flaky}},
            {"task_id": "slow", "upstream": ["flaky"], "shell": {"command": slow}},
            {"task_id": "last", "upstream": ["slow"], "shell": {"command": "sleep 1"}},
        ],
    }


def _tries(driver: webdriver.Chrome, task: str) -> list[list[str]]:
    script = (
        "return [...document.querySelectorAll(`#gantt g.bar[data-task='${arguments[0]}'] g.try`)]"
        ".map(g => [g.dataset.try, g.dataset.state]);"
    )
    return list(driver.execute_script(script, task))


def test_the_timeline_shows_every_try_and_the_estimate_follows_the_critical_path(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """After a successful run, a second run's page shows flaky's two tries (failed, then success) as
    two segments; while slow waits, the estimated end says how it was made and the critical path is
    slow then last, on the run page and on the grid; once the run ends, live, the estimate goes."""
    web_stack.register(_retried_dag(web_stack))
    (web_stack.gates / "hist1").touch()
    assert _ended(web_stack, _create(web_stack, "web_hist_retried", "hist1")).state == pb.RUN_STATE_SUCCESS
    live = _create(web_stack, "web_hist_retried", "hist2")
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/dags/web_hist_retried/runs/hist2")
    mark_page(driver)
    wait(driver, "slow to run", lambda d: "running" in text_of(d, "task-slow"))
    wait(driver, "flaky's two tries", lambda d: _tries(d, "flaky") == [["1", "failed"], ["2", "success"]])
    estimate = text_of(driver, "run-estimate")
    assert estimate.startswith("estimated end ") and "median of the last 1 successful run" in estimate, (
        estimate
    )
    assert text_of(driver, "critical-path") == "◆ slow → ◆ last"
    critical = (
        "return [...document.querySelectorAll('#gantt g.bar[data-critical]')].map(g => g.dataset.task);"
    )
    assert sorted(driver.execute_script(critical)) == ["last", "slow"]
    assert ["0", "estimated"] in _tries(driver, "last")
    shot(driver, "run-tries")

    driver.get(f"{web_stack.url}/dags/web_hist_retried/grid")
    grid_estimate = text_of(driver, "grid-estimate")
    assert grid_estimate.startswith("Run hist2: estimated end ") and "◆ slow → ◆ last" in grid_estimate, (
        grid_estimate
    )
    shot(driver, "grid-estimate")

    driver.get(f"{web_stack.url}/dags/web_hist_retried/runs/hist2")
    mark_page(driver)
    (web_stack.gates / live.run_id).touch()
    wait(driver, "the run's success", lambda d: text_of(d, "run-state").endswith("success"))
    wait(driver, "the estimate to go", lambda d: not text_of(d, "run-estimate"))
    assert _tries(driver, "last") == [["1", "success"]]
    assert_same_page(driver)
