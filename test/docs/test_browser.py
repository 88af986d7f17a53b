"""The built site in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``)
opens the home page, an API page and a tutorial served on 127.0.0.1, each renders without a console
error, and the site's search finds ``store_episode``. Screenshots of the three pages are kept in
``$ENTMACHIN_SCREENSHOTS`` (default: ``entmachin-site-screenshots`` beside pytest's temporary
directories, which outlive a passing session); the test prints their paths.

Without Chromium the test skips, except under CI (``CI`` set), where it fails: ``.ci/run`` installs it.
"""
import functools
import http.server
import os
import pathlib
import shutil
import threading

import pytest

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
PAGES = {"home": "", "api": "reference/api/entmachin.frame/", "tutorial": "tutorials/01_data_flow/"}


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        message = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def served(built_site):
    """The built site on a free port of 127.0.0.1, served by the standard library's HTTP server."""
    handler = functools.partial(_QuietHandler, directory=str(built_site[0]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    directory = pathlib.Path(os.environ.get("ENTMACHIN_SCREENSHOTS")
                             or tmp_path_factory.getbasetemp().parent / "entmachin-site-screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PAGES))
def test_the_page_renders_without_console_errors(name, browser, served, screenshots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # what earlier pages logged
    browser.get(served + PAGES[name])
    WebDriverWait(browser, 20).until(ready.presence_of_element_located((By.CSS_SELECTOR, "article.md-content__inner")))
    heading = browser.find_element(By.CSS_SELECTOR, "article h1").text
    assert heading, f"{name}: no heading rendered"
    assert browser.find_elements(By.CSS_SELECTOR, "nav.md-nav"), f"{name}: no navigation rendered"
    if name == "api":
        assert browser.find_elements(By.ID, "entmachin.frame.PPO"), "the API page has no entry for PPO"
    if name == "tutorial":
        assert len(browser.find_elements(By.CSS_SELECTOR, "article pre")) >= 2  # the code and its output
    path = screenshots / f"{name}.png"
    assert browser.save_screenshot(str(path)) and path.stat().st_size > 10_000
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, f"{name}: console errors {errors}"
    print(f"screenshot of {PAGES[name] or 'the home page'}: {path}")


@pytest.mark.slow
def test_the_search_finds_store_episode(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served)
    box = WebDriverWait(browser, 20).until(lambda b: b.find_element(By.CSS_SELECTOR, "input.md-search__input"))
    box.click()
    box.send_keys("store_episode")
    results = WebDriverWait(browser, 30).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, "li.md-search-result__item") or None)
    text = " ".join(r.text for r in results)
    assert "store_episode" in text, text
    box.send_keys(Keys.ENTER)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
