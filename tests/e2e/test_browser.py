"""JupyterLab itself, in a real browser: a reader who clones the repository opens notebook 03 and
runs its cells on the published ``mini`` results (no run made here, no output root of theirs),
up to its "Try it" part (which trains on smoke: ``tests/e2e/test_notebooks_run.py`` runs it); the
premise table, the claims table and the main figure appear, no cell fails, and a screenshot is
kept (``logs/browser/``).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them; elsewhere
``apt-get install chromium chromium-driver``); without them the test is skipped, unless
``LSA_REQUIRE_BROWSER`` is set (CI), where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from support import BIN, ROOT, chrome, chromium

NOTEBOOK = "03_regularized_finetuning.ipynb"
SCREENSHOTS = ROOT / "logs" / "browser"
#: JupyterLab's settings for the test: every cell rendered (no windowing), no autosave into
#: the copy, no news prompt over the page
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(condition, timeout: float, what: str, every: float = 0.5):
    end = time.time() + timeout
    while time.time() < end:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on localhost over a copy of the notebook, with a fresh output root (no runs,
    no LAST_PROFILE: the notebook reads the default profile, mini)."""
    browser = chromium()
    if not (ROOT / "docs" / "results" / "mini" / "MANIFEST.json").exists():
        pytest.skip("docs/results/mini has no run files to re-analyse")
    root, settings = tmp_path / "lab", tmp_path / "settings"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    for name, value in SETTINGS.items():
        (settings / Path(name).parent).mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    port, token = _free_port(), "lsa-browser-test"
    env = {**os.environ, "LSA_OUTPUT_ROOT": str(tmp_path / "out"),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("LSA_DATA_DIR", None)  # as a reader's clone: the published mini was made without
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [str(BIN / "jupyter"), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.user_settings_dir={settings}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        def listening():
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                return True
            except OSError:
                return server.poll() is not None  # died: stop waiting, fail below
        _wait(listening, 120, "JupyterLab to listen")
        assert server.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
        yield f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}", browser
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()


def test_notebook_03_runs_in_jupyterlab_on_the_published_mini(lab):
    from selenium.webdriver.common.by import By

    url, browser = lab
    driver = chrome(browser, "--window-size=1400,1100")
    try:
        driver.get(url)
        cells = lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")  # noqa: E731
        _wait(lambda: len(cells()) > 5, 120, "the notebook's cells")
        _wait(lambda: "Idle" in driver.find_element(By.CSS_SELECTOR, "#jp-main-statusbar").text,
              120, "the kernel to start")

        def click(selector: str, text: str) -> bool:
            for element in driver.find_elements(By.CSS_SELECTOR, selector):
                if element.text.strip() == text:
                    element.click()
                    return True
            return False

        # select the "Try it" heading, then run every cell above it
        heading = next(c for c in driver.find_elements(By.CSS_SELECTOR, ".jp-MarkdownCell")
                       if c.text.strip().startswith("Try it"))
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", heading)
        heading.find_element(By.CSS_SELECTOR, ".jp-InputPrompt").click()
        assert click(".lm-MenuBar-itemLabel", "Run")
        _wait(lambda: click(".lm-Menu-itemLabel", "Run All Above Selected Cell"), 10,
              "Run All Above Selected Cell")

        def prompts() -> list[str]:
            return [e.text for e in driver.find_elements(By.CSS_SELECTOR,
                                                         ".jp-CodeCell .jp-InputPrompt")]

        _wait(lambda: any("*" in p for p in prompts()) or all(p.strip("[]: ") for p in
                                                              prompts()), 30, "the run to start")
        _wait(lambda: not any("*" in p for p in prompts()), 600, "every cell to finish", 1.0)
        stderr = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        errors = driver.find_elements(By.CSS_SELECTOR, stderr)
        tracebacks = [e.text[:500] for e in errors if "Traceback" in e.text or "Error" in e.text]
        assert not tracebacks, tracebacks
        unrun = [p for p in prompts()[:-1] if not p.strip("[]: ")]  # all but Try it's cell
        assert not unrun, f"{len(unrun)} cells did not run: {prompts()}"
        page = driver.find_element(By.CSS_SELECTOR, ".jp-Notebook").text
        assert "published results of `mini`" in page          # says what it reads
        assert "G3.eabf" in page and "G1" in page              # the premise table
        assert "S5.1" in page and "verdict" in page            # the claims table
        figure = next(c for c in cells() if "fig_table2_ppl_by_window" in c.text)
        images = figure.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
        assert images and images[0].size["height"] > 100, "the main figure is not shown"
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", images[0])
        time.sleep(0.5)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / "03_regularized_finetuning.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
    finally:
        driver.quit()
