"""Headless Chromium for the tests: Debian's /usr/bin/chromium, driven by Playwright
(never a browser build of Playwright's own: `executable_path` names Debian's).

Chromium runs as root here, so without its sandbox, and with every background
connection turned off (the machine has no network: each would be refused).
Its profile is a fresh directory under the test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium() -> str:
    """/usr/bin/chromium, installed with apt-get when missing (root only); else skip."""
    if CHROMIUM.exists():
        return str(CHROMIUM)
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip("/usr/bin/chromium is missing and cannot be installed (needs apt-get as root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    out = ""
    for cmd in (install, ["apt-get", "update"], install):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        out = proc.stdout[-500:] + proc.stderr[-1500:]
        if CHROMIUM.exists():
            return str(CHROMIUM)
    pytest.skip(f"/usr/bin/chromium is missing and `apt-get install chromium` failed: {out}")


@dataclass
class Browser:
    """A page of a headless Chromium, with what it did that a test should see: every
    request it made, and every script error and console message of its pages."""

    context: Any
    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def new_page(self) -> Any:
        page = self.context.new_page()
        self._watch(page)
        return page

    def _watch(self, page: Any) -> None:
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on(
            "console",
            lambda m: (
                self.errors.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )


@contextmanager
def browser(tmp_path: Path, width: int = 1300, height: int = 1000) -> Iterator[Browser]:
    """Playwright's Chromium, Debian's build, in a profile of its own under tmp_path."""
    from playwright.sync_api import sync_playwright

    exe = chromium()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=exe,
            headless=True,
            args=CHROMIUM_FLAGS[1:],
            viewport={"width": width, "height": height},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            b = Browser(context, page)
            context.on("request", lambda r: b.requests.append(r.url))
            b._watch(page)
            yield b
        finally:
            context.close()
