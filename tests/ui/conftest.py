"""Fixtures for the browser tests: a Dagster instance with history, a webserver, headless Chromium.

Everything runs on 127.0.0.1 with the system Chromium and its chromedriver (installed by
``.ci/bootstrap``); nothing is downloaded at test time. The webserver runs in its own process group
and is killed with it when the test ends, whatever happened.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1600,1200"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_server(url: str, proc: subprocess.Popen[bytes], timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dagster-webserver exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"dagster-webserver did not answer at {url}")


@pytest.fixture(scope="module")
def webserver(ui_home: dict[str, Any]) -> Iterator[str]:
    """Base URL of a dagster-webserver serving ``tests/ui/ui_defs.py`` on the test instance."""
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": ui_home["home"], "LANCE_UI_ROOT": ui_home["root"]}
    log = open(Path(ui_home["home"]) / "webserver.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-webserver")), "-h", "127.0.0.1", "-p", str(port),
         "-f", str(REPO / "tests" / "ui" / "ui_defs.py"), "-a", "defs"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_server(f"http://127.0.0.1:{port}/server_info", proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        # The webserver starts a code server child: end the whole process group.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser(ui_home: dict[str, Any]) -> Iterator[Any]:
    """Headless Chromium driven by Selenium through the system chromedriver."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("chromium and chromedriver are not installed (bash .ci/bootstrap installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [*CHROME_FLAGS, f"--user-data-dir={Path(ui_home['home']) / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
