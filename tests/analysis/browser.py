"""Open a local HTML file in headless Chromium with networking off, as a person would see it."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    # Networking off: no proxy reachable and no host resolves, so any fetch fails fast.
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageView:
    figures: tuple[int, int] | None  # (loaded, total) images, from the page's own marker
    console: list[str]  # console messages and uncaught errors the page produced
    dom: str


def view(
    page: Path,
    screenshot: Path | None = None,
    timeout: float = 60,
    size: tuple[int, int] = (1400, 3200),
) -> PageView:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium")
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [
                    binary,
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    f"--screenshot={screenshot}",
                    f"--window-size={size[0]},{size[1]}",
                    "--hide-scrollbars",
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
    marker = re.search(r'data-figures="(\d+)/(\d+)"', done.stdout)
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return PageView(
        figures=(int(marker[1]), int(marker[2])) if marker else None,
        console=console,
        dom=done.stdout,
    )
