"""Phone-sized and dark screenshots of the dashboard: ``docs/screenshots/phone-*.png``.

Seeds the same world as ``bench/screenshots.py`` and photographs, at 390x844
(light), the home page, the jobs, a job, an incident, every page of the single
pane, the supervision canvas and a task; one opened menu; and the desktop home
page in the dark theme.

Run::

    .venv/bin/python bench/screenshots_phone.py
"""

from __future__ import annotations

import sys

sys.path.append(sys.path.pop(0))

import re
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import screenshots as shots
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store.tokens import Role

PHONE = {"width": 390, "height": 844}


def photograph(base: str, token: str, paths: dict[str, str], out: Path) -> list[Path]:
    """Phone shots of each page, the menu opened, and the home page dark on a desktop."""
    from playwright.sync_api import sync_playwright

    taken = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shots.CHROMIUM, args=shots.CHROMIUM_ARGS
        )
        try:
            for name, options in (
                ("phone", {"viewport": PHONE, "device_scale_factor": 2}),
                ("dark", {"viewport": {"width": 1280, "height": 860}, "color_scheme": "dark"}),
            ):
                page = browser.new_context(**options).new_page()
                page.goto(f"{base}/web/login")
                page.fill("#token", token)
                page.click("button[type=submit]")
                page.wait_for_url(re.compile(r"/web/$"))
                for shot, path in paths.items():
                    if name == "dark" and shot != "home":
                        continue
                    page.goto(f"{base}{path}", wait_until="load")
                    page.wait_for_selector("body[data-stream=open]")
                    taken.append(out / f"{name}-{shot}.png")
                    page.screenshot(path=taken[-1], full_page=True)
                if name == "phone":
                    page.goto(f"{base}/web/jobs")
                    page.click("#menu-btn")
                    taken.append(out / "phone-menu.png")
                    page.screenshot(path=taken[-1])
                page.context.close()
        finally:
            browser.close()
    return taken


def main() -> None:
    out = shots.OUT
    with tempfile.TemporaryDirectory(prefix="wk-shots-") as name:
        folder = Path(name)
        (folder / "data").mkdir()
        url = f"sqlite:///{folder / 'data' / 'watchkeeper.db'}"
        settings = shots.settings_for(folder, url, kinds=shots.KINDS, prices=shots.PRICES)
        runtime = Runtime.open(settings, notifier=OpsNotifier(settings.ops))
        shots.seed_runs(runtime)
        queue, job_id = shots.seed_queue(runtime, folder)
        shots.seed_spend(runtime)
        token = runtime.store.tokens.create(Role.ADMIN, "ana", datetime.now(UTC))[1]
        try:
            with shots.serve(runtime) as (base, app):
                shots.decorate(app)
                time.sleep(4)  # the crawl with a one-second budget stalls; its incident opens
                paths = {
                    "home": "/web/?all=1",
                    "jobs": "/web/jobs",
                    "job": f"/web/jobs/{job_id}",
                    "incident": "/web/incidents/1",
                    **shots.PANE_PAGES,
                    "task": f"/web/tasks/{queue.job(job_id).tasks[0].id}",
                }
                taken = photograph(base, token, paths, out)
        finally:
            runtime.close()
    for path in taken:
        print(path)


if __name__ == "__main__":
    main()
