"""The web UI's security in a real browser: what a viewer is offered, forged change requests,
hostile text shown as text, the security headers, health and metrics."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from schedd.v1 import api_pb2, resources_pb2 as pb
from tests.web.browsing import PARAMS_DAG, shot, sign_in, text_of, wait
from tests.web.conftest import WebStack
from tests.web.web_tasks import SCRIPT

pytestmark = pytest.mark.e2e


def post(stack: WebStack, path: str, fields: dict[str, str], *, cookie: str, origin: str = "") -> int:
    """POST a form as a forger would, with the session cookie given; the status answered."""
    request = urllib.request.Request(
        stack.url + path, data=urllib.parse.urlencode(fields).encode(), method="POST"
    )
    request.add_header("Cookie", f"schedd_session={cookie}")
    if origin:
        request.add_header("Origin", origin)
    opener = urllib.request.build_opener(NoRedirects)
    try:
        with opener.open(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def paused(stack: WebStack, dag_id: str) -> bool:
    dag = stack.call(stack.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"))
    assert isinstance(dag, pb.Dag)
    return dag.paused


def test_a_viewer_sees_no_controls_and_forged_changes_are_refused(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A viewer's pages offer no trigger, pause, clear, mark or cancel, and its change requests are
    refused even with its own valid CSRF token; an admin's session is refused without the CSRF
    token, with a wrong one, or from another site's origin; a sign-in posted from elsewhere is
    refused. Nothing changes."""
    web_stack.register(PARAMS_DAG)
    run = web_stack.trigger("web_params")
    sign_in(driver, web_stack, web_stack.viewer_token)
    assert text_of(driver, "role") == "viewer" and text_of(driver, "principal") == "web-viewer"
    shot(driver, "viewer-dags")
    assert not driver.find_elements(By.CSS_SELECTOR, ".trigger, button.switch")
    driver.get(web_stack.url + f"/dags/web_params/runs/{urllib.parse.quote(run.run_id, safe='')}")
    assert not driver.find_elements(By.CSS_SELECTOR, "a.clear, a.mark-success, #cancel-run, #clear-failed")
    viewer_cookie = driver.get_cookie("schedd_session")
    assert viewer_cookie is not None
    viewer_csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value") or ""
    driver.get(f"{web_stack.url}/dags/web_params/trigger")
    assert "may not change anything" in driver.find_element(By.TAG_NAME, "body").text

    pause = {"paused": "true", "next": "/dags"}
    assert (
        post(
            web_stack, "/dags/web_params/pause", {**pause, "csrf": viewer_csrf}, cookie=viewer_cookie["value"]
        )
        == 403
    )

    sign_in(driver, web_stack, web_stack.admin_token)
    admin_cookie = driver.get_cookie("schedd_session")
    assert admin_cookie is not None
    admin_csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value") or ""
    cookie = admin_cookie["value"]
    assert post(web_stack, "/dags/web_params/pause", pause, cookie=cookie) == 403
    assert post(web_stack, "/dags/web_params/pause", {**pause, "csrf": "forged"}, cookie=cookie) == 403
    evil = "http://evil.example"
    assert (
        post(web_stack, "/dags/web_params/pause", {**pause, "csrf": admin_csrf}, cookie=cookie, origin=evil)
        == 403
    )
    assert not paused(web_stack, "web_params")
    # The same request with the session's token does what it says: the refusals above were the checks.
    assert post(web_stack, "/dags/web_params/pause", {**pause, "csrf": admin_csrf}, cookie=cookie) == 303
    assert paused(web_stack, "web_params")
    web_stack.call(web_stack.dags.UnpauseDag, api_pb2.PauseDagRequest(name="dags/web_params"))
    # Another site cannot sign a browser in with a token of its choosing: the sign-in form's
    # double-submit value is missing from such a post.
    signin = {"token": web_stack.admin_token, "csrf": "guessed", "next": "/dags"}
    assert post(web_stack, "/signin", signin, cookie="") == 403


HOSTILE = "<script>window.__xss='{}'</script>"
HOSTILE_URL = "javascript:window.__xss='{}'"


def assert_inert(driver: webdriver.Chrome, page: str) -> None:
    """Nothing hostile ran or became markup: no marker, only our own script, no image, no link or
    source to a ``javascript:`` URL."""
    assert driver.execute_script("return window.__xss === undefined;"), f"{page}: a payload ran"
    assert driver.execute_script("return document.scripts.length;") == 1, f"{page}: a script element got in"
    assert driver.execute_script("return document.images.length;") == 0, f"{page}: an image got in"
    links = (
        "return [...document.querySelectorAll('[href],[src]')]"
        ".map(e => e.getAttribute('href') || e.getAttribute('src'));"
    )
    assert not [u for u in driver.execute_script(links) if u.lower().startswith("javascript:")], page


def test_hostile_text_is_shown_as_text_and_never_runs(web_stack: WebStack, driver: webdriver.Chrome) -> None:
    """Markup and ``javascript:`` URLs in a DAG's description, a param's default and schema, a run's
    conf, a task's log and its result are shown literally on every page that shows them, and none of
    them runs (a script that ran would set ``window.__xss``)."""
    web_stack.register(
        {
            "dag_id": "web_hostile",
            "description": HOSTILE.format("description") + " " + HOSTILE_URL.format("description-url"),
            "params": {"note": HOSTILE.format("param")},
            "param_schemas": {"note": {"type": "string", "description": HOSTILE_URL.format("schema")}},
            "tasks": [{"task_id": "hostile", "python": {"target": "tests.web.web_tasks:hostile_result"}}],
        }
    )
    run = web_stack.trigger("web_hostile", {"note": HOSTILE.format("conf")})
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags?q=hostile")
    assert (
        HOSTILE.format("description")
        in driver.find_element(By.CSS_SELECTOR, "#dag-web_hostile .description").text
    )
    assert_inert(driver, "dags")
    driver.get(f"{web_stack.url}/dags/web_hostile/trigger")
    assert driver.find_element(By.ID, "param-note").get_attribute("value") == HOSTILE.format("param")
    assert HOSTILE_URL.format("schema") in driver.find_element(By.ID, "field-note").text
    assert_inert(driver, "trigger")
    run_path = f"/dags/web_hostile/runs/{urllib.parse.quote(run.run_id, safe='')}"
    driver.get(web_stack.url + run_path)
    assert HOSTILE.format("conf") in text_of(driver, "conf")
    wait(driver, "the run's end", lambda d: text_of(d, "run-state").endswith(("success", "failed")))
    assert text_of(driver, "run-state").endswith("success")
    assert_inert(driver, "run")
    driver.get(f"{web_stack.url}/dags/web_hostile/grid")
    assert HOSTILE.format("description") in text_of(driver, "dag-description")
    assert_inert(driver, "grid")
    driver.get(f"{web_stack.url}{run_path}/tasks/hostile")
    assert SCRIPT in text_of(driver, "result")
    wait(driver, "the log", lambda d: d.find_element(By.ID, "log").get_attribute("data-ended") == "1")
    assert SCRIPT in text_of(driver, "log") and "javascript:window.__xss='result-url'" in text_of(
        driver, "log"
    )
    assert_inert(driver, "task")


def test_health_metrics_and_security_headers(web_stack: WebStack) -> None:
    """``/healthz`` answers; Prometheus metrics count the requests by route and show the shared
    watches; pages, errors and static files all carry the strict CSP (no inline script), nosniff
    and no framing; pages are not cached."""
    with urllib.request.urlopen(f"{web_stack.url}/healthz", timeout=30) as response:
        assert response.status == 200
    metrics_url = f"http://{web_stack.cluster.metrics['web']}/metrics"
    with urllib.request.urlopen(metrics_url, timeout=30) as response:
        metrics = response.read().decode()
    assert 'schedd_web_requests_total{route="/dags/{dag_id}/runs/{run_id}",status="200"}' in metrics
    assert "schedd_web_run_watches " in metrics and "schedd_web_sessions " in metrics
    for path in ("/signin", "/static/app.js", "/dags"):
        with urllib.request.urlopen(web_stack.url + path, timeout=30) as response:
            headers = response.headers
            assert "script-src 'self';" in headers["Content-Security-Policy"], path
            assert "unsafe-inline" not in headers["Content-Security-Policy"], path
            assert headers["X-Content-Type-Options"] == "nosniff", path
            assert headers["X-Frame-Options"] == "DENY", path
            if not path.startswith("/static/"):
                assert headers["Cache-Control"] == "no-store", path
