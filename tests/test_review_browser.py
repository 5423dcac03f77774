"""The review app in a real browser: Chromium (Debian's package) driven by Selenium through chromedriver.

`make setup` installs chromium and chromium-driver with apt-get where it can; where it cannot, these tests
are skipped with the reason, except where PRM_LABELER_REQUIRE_BROWSER=1 (CI sets it): there a missing
browser fails. Each page is saved as a screenshot under the test's tmp dir.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.review_support import ViewServer

REQUIRE_BROWSER = "PRM_LABELER_REQUIRE_BROWSER"


def _browser_paths() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        driver = None
    if browser and driver:
        return browser, driver
    why = "Chromium, chromedriver or selenium is missing: `make setup` installs them (apt-get install chromium chromium-driver) where it can"
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"{why}; {REQUIRE_BROWSER}=1 says this machine must run the browser tests", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    browser_binary, driver_binary = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser_binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_binary), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


@pytest.fixture
def labelled(sample_labels_output, tmp_path):
    return Path(shutil.copytree(sample_labels_output, tmp_path / "out"))


@pytest.mark.engine
def test_a_reviewer_filters_opens_corrects_and_training_reads_the_correction(browser, labelled, tiny_model_dir, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from labeler.prm.data import build_examples
    from labeler.prm.stepwise import read_training_rows

    def shot(name: str) -> None:
        browser.save_screenshot(str(tmp_path / f"{name}.png"))

    with ViewServer(labelled, "--reviewer", "ada", log=tmp_path / "view.log") as server:
        # the table: every solution of the output
        browser.get(server.url)
        shot("1-table")
        rows = browser.find_elements(By.CSS_SELECTOR, "tr.solution")
        assert len(rows) == 8
        assert browser.find_element(By.ID, "count").text.startswith("8 of 8 solutions")

        # filter: the problems about pencils (a text search), then by label source
        browser.find_element(By.NAME, "text").send_keys("pencils")
        Select(browser.find_element(By.NAME, "source")).select_by_visible_text("monte-carlo")
        browser.find_element(By.ID, "apply").click()
        shot("2-filtered")
        filtered = browser.find_elements(By.CSS_SELECTOR, "tr.solution")
        assert len(filtered) == 1 and "pencils" in filtered[0].text
        assert browser.find_element(By.ID, "count").text.startswith("1 of 8 solutions")

        # open the solution: its steps, labels and rollouts (loaded on click), and check --explain on one
        filtered[0].find_element(By.TAG_NAME, "a").click()
        steps = browser.find_elements(By.CSS_SELECTOR, "div.step")
        assert len(steps) == 2 and "8 + 6 = 14" in steps[0].text
        solution_url = browser.current_url
        solution_id = solution_url.rstrip("/").split("/")[-1]
        steps[0].find_element(By.CSS_SELECTOR, "a.rollouts-link").click()
        rollouts = browser.find_elements(By.CSS_SELECTOR, "#rollouts-0 tr.rollout")
        assert len(rollouts) == 2
        rollouts[0].find_element(By.CSS_SELECTOR, "a.explain-link").click()
        explanation = browser.find_element(By.CSS_SELECTOR, "#rollouts-0 .explain")
        assert "recorded verdict" in explanation.text and "checker now" in explanation.text
        shot("3-solution")

        # correct step 0: wrong, with a note
        step = browser.find_element(By.ID, "step-0")
        step.find_element(By.CSS_SELECTOR, "form.review input[name=note]").send_keys("14 is right but the plan is wrong")
        step.find_element(By.CSS_SELECTOR, "form.review button[value=wrong]").click()
        assert "correction saved: wrong" in browser.find_element(By.CSS_SELECTOR, ".saved").text
        shot("4-corrected")

        # reload: the correction is kept, and the solution's labels say so
        browser.get(solution_url)
        reviewed = browser.find_element(By.CSS_SELECTOR, "#step-0 .reviewed")
        assert "wrong" in reviewed.text and "ada" in reviewed.text and "the plan is wrong" in reviewed.text
        assert browser.find_element(By.ID, "corrected-first-error").text == "step 0"
        assert "wrong" in browser.find_element(By.CSS_SELECTOR, "#history").text
        shot("5-reloaded")

        # the table's reviewed filter finds it
        browser.get(server.url + "/?reviewed=yes")
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.solution")) == 1
        shot("6-reviewed")

        # a solution that does not exist: a 404 page, not a traceback
        browser.get(server.url + "/solution/0/no-such-solution")
        assert "Not found" in browser.find_element(By.TAG_NAME, "h1").text
        assert "Traceback" not in browser.page_source
        shot("7-not-found")

    # train's data loader reads the corrected step as a human label: a target of 0
    rows = {row.solution_id: row for row in read_training_rows(str(labelled))}
    corrected = rows[solution_id]
    assert corrected.label_source == "human" and corrected.label_method[0] == "human" and corrected.hard_labels[0] is False

    from transformers import AutoTokenizer

    examples, _ = build_examples([corrected], AutoTokenizer.from_pretrained(tiny_model_dir), "soft", 1024)
    assert examples[0].targets[0] == 0.0  # the reviewer's "wrong", not the rollouts' soft label
