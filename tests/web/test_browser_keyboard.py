"""The web UI by keyboard and without colour, in a real browser: tabbing reaches the main controls
and shows where the focus is, every form field has a label, and states are told by glyph and shape
as well as colour."""

from __future__ import annotations

import urllib.parse

import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from tests.web.browsing import PARAMS_DAG, shot, sign_in, wait
from tests.web.conftest import WebStack

pytestmark = pytest.mark.e2e

#: The DAG of these tests: typed params (a trigger form with fields), one shell task.
KEYBOARD_DAG = {**PARAMS_DAG, "dag_id": "web_keyboard"}
#: Tab presses at most per page.
MAX_TABS = 80

FOCUSED = """
const e = document.activeElement;
const style = getComputedStyle(e);
const again = e.dataset.tabbed === '1';
e.dataset.tabbed = '1';
return {again: again, name: e.id || e.getAttribute('href') || e.getAttribute('name') || e.textContent.trim(),
        tag: e.tagName, outline: style.outlineStyle, width: parseFloat(style.outlineWidth) || 0,
        shadow: style.boxShadow};
"""

UNLABELLED = """
return [...document.querySelectorAll('input, select, textarea')]
  .filter(e => e.type !== 'hidden')
  .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
               && !e.getAttribute('aria-labelledby'))
  .map(e => (e.id || e.name || e.outerHTML.slice(0, 80)));
"""


def tab_through(driver: webdriver.Chrome) -> list[dict[str, object]]:
    """Each element the Tab key reaches from the top of the page, until it comes round again."""
    driver.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
    reached: list[dict[str, object]] = []
    for _ in range(MAX_TABS):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        focused = driver.execute_script(FOCUSED)
        if focused["tag"] == "BODY" or focused["again"]:
            break
        reached.append(focused)
    return reached


def assert_visible_focus(reached: list[dict[str, object]]) -> None:
    hidden = [r["name"] for r in reached if r["outline"] == "none" and r["shadow"] == "none"]
    thin = [r["name"] for r in reached if r["outline"] != "none" and float(str(r["width"])) < 2]
    assert not hidden and not thin, f"no visible focus on {hidden}, a thin one on {thin}"


def test_tabbing_reaches_the_main_controls_with_a_visible_focus(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """On the DAGs list and a grid, Tab reaches the navigation, sign-out, search, pause, trigger,
    graph and backfill links and the grid's cells, and each control shows a focus outline at least
    2 px wide."""
    web_stack.register(KEYBOARD_DAG)
    web_stack.trigger("web_keyboard")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags?q=web_keyboard")
    reached = tab_through(driver)
    names = [str(r["name"]) for r in reached]
    for wanted in ("/dags", "/backfills", "/cluster", "nav-audit", "nav-tokens", "signout", "search"):
        assert wanted in names, (wanted, names)
    assert "/dags/web_keyboard/trigger" in names and any(r["tag"] == "BUTTON" for r in reached), names
    assert_visible_focus(reached)

    driver.get(f"{web_stack.url}/dags/web_keyboard/grid")
    wait(driver, "the grid", lambda d: d.execute_script("return !!document.querySelector('a.cell');"))
    reached = tab_through(driver)
    names = [str(r["name"]) for r in reached]
    assert "graph-link" in names and "backfill" in names and "/dags/web_keyboard/trigger" in names, names
    assert any("/tasks/" in n for n in names), names
    assert_visible_focus(reached)
    shot(driver, "keyboard-focus")


def test_every_form_field_has_a_label(web_stack: WebStack, driver: webdriver.Chrome) -> None:
    """Every field of every form (sign-in, search, trigger, backfill, clear, pool, token, audit
    filters) has a label: a ``<label>`` or an aria label."""
    web_stack.register(KEYBOARD_DAG)
    run = web_stack.trigger("web_keyboard")
    driver.delete_all_cookies()
    driver.get(f"{web_stack.url}/signin")
    assert driver.execute_script(UNLABELLED) == [], "signin"
    sign_in(driver, web_stack, web_stack.admin_token)
    run_path = f"/dags/web_keyboard/runs/{urllib.parse.quote(run.run_id, safe='')}"
    pages = [
        "/dags",
        "/backfills",
        "/dags/web_keyboard/trigger",
        "/dags/web_keyboard/backfill",
        f"{run_path}/clear?task=show",
        f"{run_path}/tasks/show/mark?state=success",
        "/cluster/pools/new",
        "/cluster/pools/default_pool/edit",
        "/admin/tokens",
        "/admin/audit",
    ]
    missing = {}
    for path in pages:
        driver.get(web_stack.url + path)
        fields = driver.execute_script("return document.querySelectorAll('input, select, textarea').length;")
        assert fields, f"{path} has no form"
        unlabelled = driver.execute_script(UNLABELLED)
        if unlabelled:
            missing[path] = unlabelled
    assert not missing, missing


def test_states_are_told_by_glyph_and_shape_as_well_as_colour(
    web_stack: WebStack, driver: webdriver.Chrome
) -> None:
    """In the grid's legend every state has a glyph of its own, and done, failed and waiting states
    differ in shape too (a circle, a square, rounded corners); every cell of the grid shows its
    state's glyph, and names its state in its title."""
    web_stack.register(KEYBOARD_DAG)
    web_stack.trigger("web_keyboard")
    sign_in(driver, web_stack, web_stack.admin_token)
    driver.get(f"{web_stack.url}/dags/web_keyboard/grid")
    legend = driver.execute_script(
        "return [...document.querySelectorAll('.legend .cell')].map(c => ({state: c.className, "
        "glyph: c.textContent, radius: getComputedStyle(c).borderRadius}));"
    )
    glyphs = [entry["glyph"] for entry in legend]
    assert len(legend) >= 9 and all(glyphs) and len(set(glyphs)) == len(glyphs), legend
    radius = {entry["state"].split("state-")[1]: entry["radius"] for entry in legend}
    assert len({radius["success"], radius["failed"], radius["running"]}) == 3, radius
    glyph_of = {entry["state"].split("state-")[1]: entry["glyph"] for entry in legend}
    cells = driver.execute_script(
        "return [...document.querySelectorAll('table.grid a.cell:not(.mapped)')]"
        ".map(c => [c.dataset.state, c.textContent, c.title]);"
    )
    assert cells, "the grid has cells"
    for state, glyph, title in cells:
        assert glyph == glyph_of.get(state, glyph) and glyph and title.endswith(state), (state, glyph, title)
