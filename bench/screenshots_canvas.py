"""The supervision canvas on a phone: ``docs/screenshots/phone-supervision.png``.

Serves a fresh server (its own supervision tree, breakers and health checks) and
photographs ``/web/supervision`` at 390x844 on a touch screen, one child tapped so
its details show.

Run::

    .venv/bin/python bench/screenshots_canvas.py
"""

from __future__ import annotations

import sys

sys.path.append(sys.path.pop(0))

import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import screenshots as shots
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store.tokens import Role

PHONE = {"width": 390, "height": 844}
SHOT = "phone-supervision.png"


def photograph(base: str, token: str, out: Path) -> Path:
    """The canvas drawn, a child tapped, its details up."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shots.CHROMIUM, args=shots.CHROMIUM_ARGS
        )
        try:
            context = browser.new_context(
                viewport=PHONE, device_scale_factor=2, has_touch=True, is_mobile=True
            )
            page = context.new_page()
            page.goto(f"{base}/web/login")
            page.fill("#token", token)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/web/$"))
            page.goto(f"{base}/web/supervision", wait_until="load")
            page.wait_for_selector("body[data-stream=open]")
            child = page.locator("#sup-canvas .sn[data-type=child]").first
            child.wait_for()
            box = child.bounding_box()
            assert box is not None
            page.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_selector("#sup-panel:not([hidden])")
            path = out / SHOT
            page.screenshot(path=path)
            return path
        finally:
            browser.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="wk-shots-") as name:
        folder = Path(name)
        (folder / "data").mkdir()
        url = f"sqlite:///{folder / 'data' / 'watchkeeper.db'}"
        settings = shots.settings_for(folder, url, kinds=shots.KINDS, prices=shots.PRICES)
        runtime = Runtime.open(settings, notifier=OpsNotifier(settings.ops))
        token = runtime.store.tokens.create(Role.ADMIN, "ana", datetime.now(UTC))[1]
        try:
            with shots.serve(runtime) as (base, app):
                shots.decorate(app)
                print(photograph(base, token, shots.OUT))
        finally:
            runtime.close()


if __name__ == "__main__":
    main()
