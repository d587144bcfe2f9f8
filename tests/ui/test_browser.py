"""The operator pages in a real browser: Debian's headless chromium, driven by selenium, against a running kernel.

The kernel is ``brain serve`` on a copy of the run's planted world (six
projects through the real writers, ticked), with two tokens (every project;
org1/api only), a few registered sessions and a stored backfill dry run. The
tests check what a person would: the names and counts of ``GET /projects``,
the block of ``GET /feed?format=markdown``, the sign-in flow, and that the
bound token sees no other project's name, count or entry on any page. One
browser serves the module; waits are on conditions, never sleeps.

Each page's screenshot is saved under ``$BRAIN_UI_SCREENSHOTS`` when set,
else in the test's temporary folder, so a run leaves the checkout as it was
(docs/ui/*.png are the benchmark world's: ``bench_ui --screenshots``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from brain_kernel.settings import Settings
from tests.support.harness import HTTP, PlantedImage, brain, cloned_database, make_settings, serve_in_thread
from tests.support.planting import PROJECTS, Planted

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if CHROMIUM is None or DRIVER is None:
    pytest.skip("no chromium: apt-get install chromium chromium-driver (Debian) to run the browser tests", allow_module_level=True)

from selenium import webdriver  # noqa: E402  (only once the browser is known to be there)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ALL, API = "browser-all-0123456789", "browser-api-0123456789"
OTHERS = [pid for pid in PROJECTS if pid != "org1/api"]
WAIT = 15
# How often a wait looks again (selenium's default is every 0.5 s): a condition met just after a look costs a poll, not half a second.
POLL = 0.05


@dataclass
class Kernel:
    base: str
    settings: Settings
    planted: Planted

    def api(self, path: str, token: str = ALL, **params: object) -> object:
        r = HTTP.get(self.base + path, params=params, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        return r.json() if r.headers["content-type"].startswith("application/json") else r.text


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, _planted_image: PlantedImage) -> Iterator[Kernel]:
    """The app served over HTTP on a copy of the planted world, with sessions and a stored dry run."""
    root = tmp_path_factory.mktemp("ui-browser")
    with cloned_database(pg_admin_url, _planted_image.database_url) as url:
        settings = make_settings(root, url, tokens=[ALL, f"{API}=org1/api"])
        planted = _planted_image.restore(settings)
        assert isinstance(planted, Planted)
        dry = brain(settings, "backfill", "--dry-run")
        assert dry.exit_code == 0, dry.stderr
        stored = settings.vault / "raw" / "backfill" / "dry-run.jsonl"
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(dry.stdout)
        with serve_in_thread(settings) as base:  # the pages in a browser are the subject, not a brain serve process
            for sid, body in (
                ("ui-s1", {"project": "org1/api", "cwd": "/home/op/dev/api"}),
                ("ui-s2", {"repo": "acme/web", "cwd": "/home/op/dev/web"}),
                ("ui-s3", {"cwd": "/tmp/scratch-ui-notes"}),
            ):
                r = HTTP.post(f"{base}/sessions", json={"session_id": sid, **body}, headers={"Authorization": f"Bearer {ALL}"})
                assert r.status_code in (200, 201), r.text
            queued = HTTP.post(f"{base}/tick", params={"no_ai": "true"}, headers={"Authorization": f"Bearer {ALL}"})
            assert queued.status_code == 202, queued.text
            drained = brain(settings, "tick-drain")  # the queue's run: what it wrote and moved shows on the keeper page
            assert drained.exit_code == 0, drained.stderr
            yield Kernel(base, settings, planted)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER or ""))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("BRAIN_UI_SCREENSHOTS") or tmp_path_factory.mktemp("ui-shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wait(driver: WebDriver, locator: tuple[str, str]) -> object:
    return WebDriverWait(driver, WAIT, poll_frequency=POLL).until(ec.presence_of_element_located(locator))


def _shoot(driver: WebDriver, folder: Path, name: str) -> None:
    """The whole page: the window is made as tall as the document (at most 3,000 px), then captured."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, max(900, min(height, 3000)))
    driver.save_screenshot(str(folder / f"{name}.png"))
    driver.set_window_size(1280, 900)


def _sign_in(driver: WebDriver, base: str, token: str, then: str = "/ui") -> None:
    driver.delete_all_cookies()
    driver.get(base + then)
    WebDriverWait(driver, WAIT, poll_frequency=POLL).until(ec.url_contains("/ui/signin"))
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "signin").click()
    WebDriverWait(driver, WAIT, poll_frequency=POLL).until(ec.url_to_be(base + then))


def test_sign_in_then_the_projects_match_the_api(browser: WebDriver, kernel: Kernel, shots: Path) -> None:
    browser.delete_all_cookies()
    browser.get(kernel.base + "/ui/signin")
    _wait(browser, (By.ID, "token")).send_keys("not-a-known-token")  # type: ignore[attr-defined]
    browser.find_element(By.ID, "signin").click()
    assert "not known" in _wait(browser, (By.ID, "problem")).text  # type: ignore[attr-defined]
    _shoot(browser, shots, "signin")

    _sign_in(browser, kernel.base, ALL)
    rows = {
        row.get_attribute("data-project"): row
        for row in _wait(browser, (By.ID, "projects")).find_elements(By.CSS_SELECTOR, "tbody tr")  # type: ignore[attr-defined]
    }
    api = kernel.api("/projects")
    assert api["projects"]  # type: ignore[index]
    for p in api["projects"]:  # type: ignore[index]
        row = rows[p["id"]]
        assert row.find_element(By.CSS_SELECTOR, "th a").text == p["key"]
        assert row.find_element(By.CSS_SELECTOR, "td.total").text == str(p["total"])
        for kind in ("arc", "lesson", "decision", "milestone", "signal"):
            assert row.find_element(By.CSS_SELECTOR, f'td[data-kind="{kind}"]').text == str(p["counts"].get(kind, 0))
    assert "" in rows  # the unattributed row
    assert browser.find_element(By.ID, "who").text.startswith("t")
    _shoot(browser, shots, "projects")


def test_the_project_page_shows_the_connectors_block_and_searches(browser: WebDriver, kernel: Kernel, shots: Path) -> None:
    _sign_in(browser, kernel.base, ALL)
    browser.find_element(By.CSS_SELECTOR, 'tr[data-project="acme/web"] th a').click()
    block = _wait(browser, (By.ID, "block")).get_property("textContent")  # type: ignore[attr-defined]
    assert block == kernel.api("/feed", project="acme/web", format="markdown")
    assert browser.find_element(By.ID, "project-name").text == "acme/web"
    assert browser.find_elements(By.CSS_SELECTOR, "#arcs svg.spark")  # the heat chart, with its numbers beside it
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr.kind-lesson")
    _shoot(browser, shots, "project")

    word = sorted(kernel.planted.owned["acme/web"])[0]
    box = browser.find_element(By.ID, "q")
    box.send_keys(word)
    box.submit()
    results = _wait(browser, (By.ID, "results"))
    assert word in results.text  # type: ignore[attr-defined]
    _shoot(browser, shots, "search")


def test_the_attribution_keeper_and_signals_pages(browser: WebDriver, kernel: Kernel, shots: Path) -> None:
    _sign_in(browser, kernel.base, ALL, then="/ui/attribution")
    totals = _wait(browser, (By.ID, "totals"))
    assert int(browser.find_element(By.CSS_SELECTOR, '#totals tr[data-kind="sessions"] td').text) >= 3
    assert "/tmp/scratch-ui-notes" in browser.find_element(By.ID, "unresolved").text
    assert "arcs scanned" in browser.find_element(By.ID, "dry-run").text
    assert totals is not None and browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    _shoot(browser, shots, "attribution")

    browser.get(kernel.base + "/ui/keeper")
    ticks = _wait(browser, (By.ID, "ticks"))
    assert "brain-cli" in ticks.text and "ok" in ticks.text  # type: ignore[attr-defined]  # the planting tick
    assert "completed" in browser.find_element(By.ID, "queue").text
    coverage = browser.find_element(By.CSS_SELECTOR, '#coverage tr[data-kind="lesson"]').text
    assert coverage.split()[1] != "0"
    _shoot(browser, shots, "keeper")

    browser.get(kernel.base + "/ui/signals")
    fleet = _wait(browser, (By.ID, "signals-fleet"))
    for word in kernel.planted.fleet:
        assert word in fleet.text  # type: ignore[attr-defined]
    assert "org1/api" in browser.find_element(By.ID, "signals-mine").text
    _shoot(browser, shots, "signals")


def test_a_bound_token_sees_only_its_project_on_every_page(browser: WebDriver, kernel: Kernel, shots: Path) -> None:
    _sign_in(browser, kernel.base, API)
    foreign = {t for pid in OTHERS for t in kernel.planted.owned[pid]} | kernel.planted.unattributed
    for path in ("/ui", "/ui/project?project=org1/api", "/ui/attribution", "/ui/keeper", "/ui/signals"):
        browser.get(kernel.base + path)
        _wait(browser, (By.TAG_NAME, "h1"))
        html = browser.page_source
        assert not [pid for pid in OTHERS if pid in html], path
        assert not {t for t in foreign if t in html}, path
        if path == "/ui":
            _shoot(browser, shots, "projects-bound-token")
    browser.get(kernel.base + "/ui")
    rows = browser.find_elements(By.CSS_SELECTOR, "#projects tbody tr")
    assert [r.get_attribute("data-project") for r in rows] == ["org1/api"]
    browser.get(kernel.base + "/ui/project?project=acme/web")
    assert "No project" in _wait(browser, (By.ID, "missing")).text  # type: ignore[attr-defined]

    browser.find_element(By.ID, "signout").click()
    WebDriverWait(browser, WAIT, poll_frequency=POLL).until(ec.url_contains("/ui/signin"))
    browser.get(kernel.base + "/ui")
    WebDriverWait(browser, WAIT, poll_frequency=POLL).until(ec.url_contains("/ui/signin"))
