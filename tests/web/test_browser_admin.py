"""The cluster's changes (drain a worker, create, resize and delete a pool) and the admin pages (the
audit log, api tokens) in a real browser, and what a viewer is offered and refused there."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import grpc
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from schedd.v1 import api_pb2, api_pb2_grpc
from schedd_rpc.tls import token_metadata
from tests.polling import wait_until
from tests.web.browsing import WAIT_SECONDS, click_to_load, shot, sign_in, text_of, wait
from tests.web.conftest import RPC_TIMEOUT, WebStack
from tests.web.test_browser_security import NoRedirects

pytestmark = pytest.mark.e2e


def post_form(stack: WebStack, path: str, fields: dict[str, str], cookie: str) -> tuple[int, str]:
    """POST a form with the session cookie given, as a forger would: the status and the page."""
    request = urllib.request.Request(
        stack.url + path, data=urllib.parse.urlencode(fields).encode(), method="POST"
    )
    request.add_header("Cookie", f"schedd_session={cookie}")
    opener = urllib.request.build_opener(NoRedirects)
    try:
        with opener.open(request, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def session_of(driver: webdriver.Chrome) -> tuple[str, str]:
    """The browser's session cookie and the CSRF token of the page it shows."""
    cookie = driver.get_cookie("schedd_session")
    assert cookie is not None
    csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value") or ""
    return cookie["value"], csrf


def set_pools(stack: WebStack, requests: list[api_pb2.SetPoolRequest]) -> dict[str, api_pb2.Pool]:
    """``SetPool`` each of ``requests`` as the admin, then the pools by name."""
    metadata = token_metadata(stack.admin_token)
    with grpc.insecure_channel(stack.cluster.api_address) as channel:
        stub = api_pb2_grpc.PoolServiceStub(channel)
        for request in requests:
            stub.SetPool(request, timeout=RPC_TIMEOUT, metadata=metadata)
        listed = stub.ListPools(api_pb2.ListPoolsRequest(), timeout=RPC_TIMEOUT, metadata=metadata)
    return {p.pool: p for p in listed.pools}


def pools(stack: WebStack) -> dict[str, api_pb2.Pool]:
    return set_pools(stack, [])


def worker_state(driver: webdriver.Chrome, worker_id: str) -> str:
    script = "const r = document.querySelector(arguments[0]); return r ? r.textContent : '';"
    return str(driver.execute_script(script, f"tr[data-worker='{worker_id}'] td.worker-state")).strip()


def fill(driver: webdriver.Chrome, values: dict[str, str]) -> None:
    for name, value in values.items():
        field = driver.find_element(By.ID, name)
        field.clear()
        field.send_keys(value)


def test_an_admin_drains_a_worker_and_creates_resizes_and_deletes_a_pool(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """Each change of the cluster page asks first, saying what it changes: a worker started for the
    test is drained (it stops and leaves); a pool is created (a value that is no number refused at
    its field), resized from 3 to 5 slots, and deleted; default_pool offers no delete. The page
    shows the demand waiting for the pools."""
    web_stack.cluster.add_worker("web-drained")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/cluster")
    assert "wait for a pool slot" in text_of(driver, "demand")
    assert worker_state(driver, "web-drained") == "active"
    assert not driver.find_elements(By.CSS_SELECTOR, "tr[data-pool='default_pool'] a.delete-pool")
    click_to_load(driver, By.CSS_SELECTOR, "tr[data-worker='web-drained'] a.drain")
    assert "finishes the" in text_of(driver, "confirm-text")
    click_to_load(driver, By.ID, "confirm")
    assert text_of(driver, "done") == "Asked web-drained to drain."

    # The worker hears of it through its registry and says it drains: the page shows that once it has.
    def shows_draining() -> bool:
        driver.get(f"{web_stack.url}/cluster")
        return worker_state(driver, "web-drained") in ("draining", "gone")

    wait_until("the cluster page shows web-drained draining", shows_draining, WAIT_SECONDS)
    assert worker_state(driver, "worker-1") == "active"

    click_to_load(driver, By.ID, "new-pool")
    fill(driver, {"pool": "web_pool", "slots": "three", "description": "for the web test"})
    click_to_load(driver, By.ID, "review")
    assert "whole number" in text_of(driver, "error-slots")
    fill(driver, {"slots": "3", "share": "25"})
    click_to_load(driver, By.ID, "review")
    assert text_of(driver, "count") == "3" and "creates pool" in text_of(driver, "confirm-text")
    assert "web_pool" not in pools(web_stack)  # nothing is made before the confirmation
    click_to_load(driver, By.ID, "confirm")
    assert text_of(driver, "done") == "Saved pool web_pool."
    row = driver.find_element(By.CSS_SELECTOR, "tr[data-pool='web_pool']").text
    assert "0 / 3" in row and "25%" in row and "for the web test" in row, row

    click_to_load(driver, By.CSS_SELECTOR, "tr[data-pool='web_pool'] a.edit-pool")
    fill(driver, {"slots": "5"})
    click_to_load(driver, By.ID, "review")
    assert "from 3 to" in text_of(driver, "confirm-text") and text_of(driver, "count") == "5"
    shot(driver, "confirm-pool")
    click_to_load(driver, By.ID, "confirm")
    assert "0 / 5" in driver.find_element(By.CSS_SELECTOR, "tr[data-pool='web_pool']").text
    assert pools(web_stack)["web_pool"].slots == 5
    shot(driver, "cluster-admin")

    click_to_load(driver, By.CSS_SELECTOR, "tr[data-pool='web_pool'] a.delete-pool")
    assert "deletes pool" in text_of(driver, "confirm-text")
    click_to_load(driver, By.ID, "confirm")
    assert text_of(driver, "done") == "Deleted pool web_pool."
    assert not driver.find_elements(By.CSS_SELECTOR, "tr[data-pool='web_pool']")
    assert "web_pool" not in pools(web_stack)


def test_a_viewer_gets_no_admin_controls_and_the_api_refuses_its_forged_changes(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A viewer's cluster page has no drain or pool controls and its navigation no audit or token
    links; its forged drain, pool and token posts (with its own valid CSRF token) reach the api,
    whose refusal is the page (403 PERMISSION_DENIED), and nothing changes; the admin pages
    themselves answer with the api's refusal."""
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/cluster")
    assert not driver.find_elements(By.CSS_SELECTOR, "a.drain, a.edit-pool, a.delete-pool, #new-pool")
    assert not driver.find_elements(By.CSS_SELECTOR, "#nav-audit, #nav-tokens")
    cookie, csrf = session_of(driver)
    slots_before = pools(web_stack)["default_pool"].slots
    forged = {
        "/cluster/workers/worker-1/drain": {"csrf": csrf},
        "/cluster/pools": {"csrf": csrf, "pool": "default_pool", "slots": "1"},
        "/cluster/pools/default_pool/delete": {"csrf": csrf, "request_id": "forged"},
        "/admin/tokens": {"csrf": csrf, "name": "forged-admin", "role": "admin"},
    }
    for path, fields in forged.items():
        status, page = post_form(web_stack, path, fields, cookie)
        assert status == 403 and "PERMISSION_DENIED" in page and "viewer" in page, (path, status, page)
    assert pools(web_stack)["default_pool"].slots == slots_before
    driver.get(f"{web_stack.url}/cluster")
    assert worker_state(driver, "worker-1") == "active"
    for path in ("/admin/audit", "/admin/tokens"):
        driver.get(web_stack.url + path)
        assert "PERMISSION_DENIED" in driver.find_element(By.TAG_NAME, "h1").text, path
        assert "viewer" in text_of(driver, "error-message"), path
    shot(driver, "viewer-refused")


def test_the_audit_log_is_paged_and_filtered(web_stack: WebStack, driver: webdriver.Chrome) -> None:
    """The audit log lists the api's records newest first, 50 a page; filtered on a method it lists
    only that method's calls, and "older" leads to the next, older page (no record twice)."""
    set_pools(web_stack, [api_pb2.SetPoolRequest(pool="web_audited", slots=n + 1) for n in range(55)])
    sign_in(driver, web_stack, web_stack.admin_token)
    click_to_load(driver, By.ID, "nav-audit")
    assert driver.find_elements(By.CSS_SELECTOR, "#audit tr[data-record]")
    fill(driver, {"filter-method": "SetPool"})
    click_to_load(driver, By.ID, "filter")
    ids = "return [...document.querySelectorAll('#audit tr[data-record]')].map(r => +r.dataset.record);"
    methods = "return [...document.querySelectorAll('#audit td.method')].map(c => c.textContent);"
    first = driver.execute_script(ids)
    assert len(first) == 50 and first == sorted(first, reverse=True), first
    assert all(m.startswith("SetPool") for m in driver.execute_script(methods))
    shot(driver, "audit")
    click_to_load(driver, By.ID, "older")
    second = driver.execute_script(ids)
    assert len(second) >= 5 and max(second) < min(first), (first, second)
    assert all(m.startswith("SetPool") for m in driver.execute_script(methods))
    assert driver.find_element(By.ID, "newest")


def test_a_token_is_made_with_its_secret_shown_once_and_revoked_after_a_confirmation(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A token made on the tokens page shows its secret once (the page after it does not); the
    secret signs in with the role chosen; a taken name is refused at the field; revoking asks first,
    and the revoked token no longer signs in."""
    sign_in(driver, web_stack, web_stack.admin_token)
    click_to_load(driver, By.ID, "nav-tokens")
    fill(driver, {"token-name": "web-operator"})
    Select(driver.find_element(By.ID, "token-role")).select_by_visible_text("operator")
    click_to_load(driver, By.ID, "create-token")
    secret = driver.find_element(By.ID, "new-secret").get_attribute("value") or ""
    assert secret.startswith("sdt_"), secret
    shot(driver, "tokens")
    row = driver.find_element(By.CSS_SELECTOR, "tr[data-token='web-operator']").text
    assert "operator" in row and secret not in driver.find_element(By.ID, "tokens").text
    driver.get(f"{web_stack.url}/admin/tokens")
    assert not driver.find_elements(By.ID, "new-secret")
    assert secret not in driver.page_source
    fill(driver, {"token-name": "web-operator"})
    click_to_load(driver, By.ID, "create-token")
    assert "exists" in text_of(driver, "error-name") or "already" in text_of(driver, "error-name")

    sign_in(driver, web_stack, secret)
    assert text_of(driver, "role") == "operator" and text_of(driver, "principal") == "web-operator"
    assert not driver.find_elements(By.CSS_SELECTOR, "#nav-audit, #nav-tokens")

    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/admin/tokens")
    click_to_load(driver, By.CSS_SELECTOR, "tr[data-token='web-operator'] a.revoke")
    assert "authenticates nothing" in text_of(driver, "confirm-text")
    click_to_load(driver, By.ID, "confirm")
    assert text_of(driver, "done") == "Revoked web-operator."
    revoked = driver.find_element(By.CSS_SELECTOR, "tr[data-token='web-operator'] td.revoked").text
    assert revoked.strip(), "the revoked token shows when it was revoked"
    driver.delete_all_cookies()
    driver.get(f"{web_stack.url}/signin")
    driver.find_element(By.ID, "token").send_keys(secret)
    click_to_load(driver, By.ID, "signin")
    wait(driver, "the refusal", lambda d: bool(text_of(d, "token-error")))


def test_refused_registrations_are_listed_for_admins_with_their_error(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """A registration the api refuses (a task depending on itself through another: a cycle) is listed
    on an admin's DAGs page with the error its caller was told, as text; a viewer, who may not read
    the audit log, sees no such list."""
    cyclic = {
        "dag_id": "web_refused_cycle",
        "description": "<script>document.title='pwned'</script>",
        "tasks": [
            {"task_id": "a", "upstream": ["b"], "shell": {"command": "true"}},
            {"task_id": "b", "upstream": ["a"], "shell": {"command": "true"}},
        ],
    }
    with pytest.raises(grpc.RpcError) as refused:
        web_stack.register(cyclic)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags")
    rows = driver.find_elements(By.CSS_SELECTOR, ".registration-errors tbody tr")
    texts = [row.text for row in rows]
    assert any("web_refused_cycle" in t and "INVALID_ARGUMENT" in t for t in texts), texts
    detail = refused.value.details() or ""
    assert detail and any(detail in t for t in texts), (detail, texts)
    assert driver.title != "pwned"
    shot(driver, "registration-errors")
    sign_in(driver, web_stack, web_stack.viewer_token)
    driver.get(f"{web_stack.url}/dags")
    assert not driver.find_elements(By.CSS_SELECTOR, ".registration-errors")
