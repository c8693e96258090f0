"""The Index Manager in a real headless Chromium (Debian's ``chromium`` package, driven by
Playwright through its executable path; no browser is downloaded): open the overview, start
a rebuild and watch the live progress reach completion, see a second start refused, cancel
one, find a file through search, see an error listed. Screenshots of every page go to
``test-artifacts/screenshots/`` (git-ignored) for a person to look at."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from manager_support import BAD_FILE, FILLER_FILES, running_manager

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "screenshots"
# No background traffic: this machine's closed network refuses it, noisily.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]

if not os.path.exists(CHROMIUM):
    if os.environ.get("CONTEXTD_REQUIRE_BROWSER"):
        raise RuntimeError("CONTEXTD_REQUIRE_BROWSER is set but Debian's chromium is not "
                           "installed (apt-get install chromium)")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)",
                allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with running_manager(base) as manager, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(60_000)
        try:
            yield manager, page
        finally:
            browser.close()


def goto(page, url: str) -> None:
    """Open ``url``; once more if a reload the previous page had scheduled (the jobs page
    reloads itself when the running jobs change) aborted the navigation."""
    try:
        page.goto(url)
    except sync_api.Error as exc:
        if "ERR_ABORTED" not in str(exc):
            raise
        page.goto(url)


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_overview_opens_from_the_printed_url(browser_page):
    manager, page = browser_page
    page.goto(manager.url)
    assert page.url == f"http://127.0.0.1:{manager.port}/"  # the token left the address bar
    page.wait_for_selector("#live-state")
    facts = page.inner_text("#facts")
    assert f"{FILLER_FILES:,}"[:2] in page.inner_text(".cards") and "pid" in facts
    assert "semantic" in page.inner_text("#providers")
    shot(page, "overview")


@pytest.mark.slow
def test_rebuild_progress_advances_to_completion_and_a_second_is_refused(browser_page):
    manager, page = browser_page
    goto(page, f"http://127.0.0.1:{manager.port}/jobs")
    page.click("#rebuild")
    assert "Tick" in page.inner_text("#message")  # no confirmation, no rebuild
    page.check("#confirm-rebuild")
    page.click("#rebuild")
    page.wait_for_function("document.getElementById('message').textContent.includes('started')")
    page.click("#rebuild")
    page.wait_for_function(
        "document.getElementById('message').textContent.includes('already running')")
    assert "bad" in page.get_attribute("#message", "class")
    page.wait_for_selector("#live-job[data-status='in_progress']")
    first = page.inner_text("#live-files")
    shot(page, "jobs-running")
    page.wait_for_function(f"(document.getElementById('live-files')||{{}}).innerText !== "
                           f"{first!r}")
    page.wait_for_selector("#live-idle", timeout=120_000)
    goto(page, f"http://127.0.0.1:{manager.port}/jobs")
    top = page.locator("#jobs tbody tr").first
    assert top.locator(".status").inner_text() == "completed"
    assert re.search(r"\d+ indexed", top.inner_text())
    shot(page, "jobs")
    goto(page, f"http://127.0.0.1:{manager.port}/live")
    page.wait_for_function("document.querySelectorAll('#log tbody tr').length > 1")
    assert "complete" in page.inner_text("#log")
    shot(page, "progress")


def test_cancel_a_running_rebuild(browser_page):
    manager, page = browser_page
    goto(page, f"http://127.0.0.1:{manager.port}/jobs")
    page.check("#confirm-rebuild")
    page.click("#rebuild")
    page.click("#live-cancel", timeout=60_000)  # the live line offers Cancel while it runs
    page.wait_for_function(
        "document.getElementById('message').textContent.match(/cancel|stops/)")
    page.wait_for_selector("#live-idle", timeout=120_000)
    goto(page, f"http://127.0.0.1:{manager.port}/jobs")
    statuses = page.locator("#jobs tbody tr .status").all_inner_texts()
    assert statuses[0] == "cancelled", statuses
    shot(page, "jobs-cancelled")
    # The files the cancelled rebuild did not reach come back with an update.
    page.click("#refresh")
    page.wait_for_function("document.getElementById('message').textContent.includes('started')")
    deadline = time.monotonic() + 120
    while not _indexed_hit(manager.request("GET", "/search?q=invoice+total")[2],
                           "src/billing/invoice.py"):
        assert time.monotonic() < deadline, "the refresh did not bring the files back"
        time.sleep(0.5)
    manager.wait_idle()


def _indexed_hit(page: bytes, path: str) -> bool:
    """Whether the search page lists ``path`` as a hit from the index (a file not indexed
    yet is found too, by the text scan: provider text_scan)."""
    return any(f'hit-path">{path}<'.encode() in hit and b"text_scan" not in hit
               for hit in (h.split(b"</h2>")[0] for h in page.split(b'<div class="hit">')[1:]))


def test_search_finds_a_file(browser_page):
    manager, page = browser_page
    goto(page, f"http://127.0.0.1:{manager.port}/search")
    page.fill("input[name=q]", "invoice total of the lines")
    page.press("input[name=q]", "Enter")
    page.wait_for_selector("#hits .hit")
    assert "src/billing/invoice.py" in page.locator(".hit-path").all_inner_texts()
    assert page.locator("#hits mark").count() > 0
    assert "<project_context" in page.inner_text("#context-block")
    shot(page, "search")


def test_errors_are_listed(browser_page):
    manager, page = browser_page
    goto(page, f"http://127.0.0.1:{manager.port}/errors")
    table = page.inner_text("#errors")
    assert BAD_FILE in table and "decode_error" in table and "not valid UTF-8" in table
    page.select_option("select[name=type]", "decode_error")
    page.click("#error-filter button")
    assert BAD_FILE in page.inner_text("#errors")
    shot(page, "errors")


def test_knowledge_memory_and_sessions_pages(browser_page):
    manager, page = browser_page
    goto(page, f"http://127.0.0.1:{manager.port}/knowledge")
    assert "default" in page.inner_text("#contexts")
    page.click("#contexts a")
    page.wait_for_selector("#documents")
    shot(page, "knowledge")
    goto(page, f"http://127.0.0.1:{manager.port}/memory")
    page.wait_for_selector("#segments")
    shot(page, "memory")
    goto(page, f"http://127.0.0.1:{manager.port}/sessions")
    page.wait_for_selector("#sessions")
    shot(page, "sessions")


def test_savings_page_draws_its_charts(browser_page):
    manager, page = browser_page
    goto(page, f"http://127.0.0.1:{manager.port}/savings")
    assert page.locator("#per-day svg").count() == 1
    assert "tokens served" in page.inner_text(".cards")
    shot(page, "savings")
