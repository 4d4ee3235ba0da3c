"""First paint of every dashboard page at 1,000 runs and 10,000 jobs, in a real browser.

What it measures: a ``watchkeeper serve`` process (its own process, as in
production) over a database holding ``--runs`` push runs (a tenth of them
stalled, each with an open incident and its buttons) and ``--jobs`` queued
jobs. Headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright) logs in as an admin, then loads each page ``--loads`` times.
Each load reports the browser's own paint timings
(``performance.getEntriesByType('paint')``: first paint and first
contentful paint, from the start of the navigation) and the time the server
took to answer the HTML (navigation timing, request start to response end).
Pages that load while the shared read of every kind is fresh reuse it;
"after a move" loads follow a progress report on one run, so each pays for
a new read of every kind (1,000 runs and 10,000 queued tasks).

Goals: first paint of every page under 300 ms here, and under 500 ms right after
something moved.

Run::

    .venv/bin/python bench/dashboard.py                     # SQLite
    .venv/bin/python bench/dashboard.py --db both --json dashboard.json
"""

from __future__ import annotations

import sys

# This folder's queue.py (the queue benchmark) would shadow the standard library's queue
# module, which psycopg and concurrent.futures import: search this folder last.
sys.path.append(sys.path.pop(0))

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import _common as common
from watchkeeper.records.queue import NewJob
from watchkeeper.server.web.shared import OVERVIEW_TTL_S
from watchkeeper.store import Store
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.runs import NewRun

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COLD_LOADS = 5
#: Every page of the dashboard; ``{job}``, ``{task}`` and ``{incident}`` are filled from the API.
PAGES = {
    "home": "/web/",
    "home, all": "/web/?all=1",
    "incidents": "/web/incidents",
    "incident": "/web/incidents/{incident}",
    "jobs": "/web/jobs",
    "jobs, text filter": "/web/jobs?q=no-such-title",
    "job": "/web/jobs/{job}",
    "topology": "/web/topology",
    "spend": "/web/spend",
    "processes": "/web/procs",
    "silences": "/web/silences",
    "task": "/web/tasks/{task}",
    "supervision": "/web/supervision",
    "models": "/web/models",
    "integrations": "/web/integrations",
    "settings": "/web/settings",
    "getting started": "/web/onboarding",
}
PAINTED = "performance.getEntriesByType('paint').length >= 2"
TIMINGS = """() => {
  const paint = Object.fromEntries(
    performance.getEntriesByType('paint').map(e => [e.name, e.startTime]));
  const nav = performance.getEntriesByType('navigation')[0];
  return {fp: paint['first-paint'], fcp: paint['first-contentful-paint'],
          server: nav.responseEnd - nav.requestStart, bytes: nav.transferSize};
}"""


def seed(db_url: str, runs: int, jobs: int) -> None:
    """Push runs (a tenth stalling within a second) and queued jobs, written straight in."""
    store = Store(db_url)
    now = datetime.now(UTC)
    for n in range(runs):
        stalls = n % 10 == 0
        store.runs.start(
            NewRun(
                "crawl",
                f"crawl-{n:05d}",
                f"crawl site {n}",
                None,
                "none",
                1.0 if stalls else 3600.0,
                None,
                3600.0,
            ),
            now,
        )
    news = [
        NewJob(
            f"job {n}: summarise report {n}",
            f"org-{n % 7}",
            f"fleet-{n % 3}",
            {"argv": ["true"]},
            "bench",
        )
        for n in range(jobs)
    ]
    QueueStore(store.engine).submit_many(news, now)
    store.close()


def wait_for_incidents(server: common.Server, count: int) -> None:
    """Until the server's first sweeps opened ``count`` incidents."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = httpx.get(
            f"{server.base_url}/api/v1/incidents",
            params={"limit": 1000},
            headers=server.headers,
            timeout=30,
        )
        if len(answer.json()["incidents"]) >= count:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the server did not open {count} incidents within 60 s")


def some_ids(base_url: str, token: str) -> dict[str, str]:
    """A job, one of its tasks and an incident, for the pages that show one."""
    headers = {"Authorization": f"Bearer {token}"}
    jobs = httpx.get(f"{base_url}/api/v1/jobs", params={"limit": 1}, headers=headers, timeout=30)
    job = jobs.raise_for_status().json()["jobs"][0]
    incidents = httpx.get(
        f"{base_url}/api/v1/incidents", params={"limit": 1}, headers=headers, timeout=30
    )
    incident = incidents.raise_for_status().json()["incidents"][0]
    return {"job": job["id"], "task": job["tasks"][0]["id"], "incident": str(incident["id"])}


def load(page: Any, url: str) -> dict[str, float]:
    """Load ``url`` and read its timings once the browser has painted (paint may follow load)."""
    page.goto(url, wait_until="load")
    page.wait_for_function(PAINTED, timeout=30_000)
    timings: dict[str, float] = page.evaluate(TIMINGS)
    return timings


def moved(base_url: str, reporter: str, n: int) -> None:
    """Something moves (a run reports progress), so the next page reads every kind again."""
    httpx.post(
        f"{base_url}/api/v1/runs/crawl/crawl-00001/progress",
        json={"step": f"page {n}"},
        headers={"Authorization": f"Bearer {reporter}"},
        timeout=30,
    ).raise_for_status()
    time.sleep(OVERVIEW_TTL_S + 0.5)  # the stream saw it (within a second), or the read expired


def browse(
    base_url: str, admin_token: str, reporter: str, loads: int, pages: dict[str, str]
) -> dict[str, Any]:
    """Log in, then load each page ``loads`` times and collect the browser's timings."""
    from playwright.sync_api import sync_playwright

    found: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.goto(f"{base_url}/web/login")
            page.fill("#token", admin_token)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base_url}/web/")
            ids = some_ids(base_url, admin_token)
            for name, shape in pages.items():
                path = shape.format(**ids)
                samples, cold = [], []
                for _ in range(loads + 1):
                    samples.append(load(page, f"{base_url}{path}"))
                for n in range(COLD_LOADS):
                    page.goto("about:blank")
                    moved(base_url, reporter, n)
                    cold.append(load(page, f"{base_url}{path}"))
                found[name] = summarise(samples, cold)
        finally:
            browser.close()
    return found


def chosen(names: str) -> dict[str, str]:
    """The pages named (comma-separated), or every page."""
    if not names:
        return PAGES
    wanted = [name.strip() for name in names.split(",")]
    unknown = [name for name in wanted if name not in PAGES]
    if unknown:
        raise SystemExit(f"no page named {unknown}; the pages are: {', '.join(PAGES)}")
    return {name: PAGES[name] for name in wanted}


def summarise(samples: list[dict[str, float]], cold: list[dict[str, float]]) -> dict[str, Any]:
    """Medians and p95 of back-to-back loads, and of loads after the shared read expired."""
    warm = samples[1:]

    def pick(found: list[dict[str, float]], key: str) -> list[float]:
        values = [float(s[key]) for s in found if s.get(key) is not None]
        if not values:
            raise RuntimeError(f"the browser reported no {key} timings")
        return values

    return {
        "first_paint_median_ms": statistics.median(pick(warm, "fp")),
        "first_paint_p95_ms": common.percentile(pick(warm, "fp"), 95),
        "first_contentful_paint_median_ms": statistics.median(pick(warm, "fcp")),
        "server_html_median_ms": statistics.median(pick(warm, "server")),
        "after_move_first_paint_median_ms": statistics.median(pick(cold, "fp")),
        "after_move_server_html_median_ms": statistics.median(pick(cold, "server")),
        "html_bytes": int(warm[-1].get("bytes") or 0),
        "loads": len(warm),
        "after_move_loads": len(cold),
    }


def measure(backend: str, args: argparse.Namespace) -> common.Figures:
    """Seed, serve, browse; the figures of one database."""
    with tempfile.TemporaryDirectory(prefix="wk-bench-dash-") as name:
        folder = Path(name)
        (folder / "data").mkdir()
        with common.database(backend, folder) as db_url:
            started = time.perf_counter()
            seed(db_url, args.runs, args.jobs)
            seeded_s = time.perf_counter() - started
            time.sleep(1.5)  # the stalling tenth runs out of budget before the server starts
            with common.serve(db_url, folder) as server:
                wait_for_incidents(server, args.runs // 10)
                admin = common.create_token(folder / "watchkeeper.toml", "admin")
                pages = browse(server.base_url, admin, server.token, args.loads, chosen(args.pages))
    return {"runs": args.runs, "jobs": args.jobs, "seed_s": seeded_s, "pages": pages}


def show(backend: str, figures: common.Figures) -> None:
    """Print one database's figures: a line per page, in ms."""
    print(
        f"\n{backend}: {figures['runs']:,} runs, {figures['jobs']:,} jobs; first paint median "
        "(p95) and the server's HTML time, then the same right after something moved"
    )
    print(f"  {'page':<20} {'first paint':>16} {'server':>8} {'after move':>11} {'server':>8}")
    for name, page in figures["pages"].items():
        painted = f"{page['first_paint_median_ms']:.0f} ({page['first_paint_p95_ms']:.0f})"
        print(
            f"  {name:<20} {painted:>16} {page['server_html_median_ms']:>8.0f} "
            f"{page['after_move_first_paint_median_ms']:>11.0f} "
            f"{page['after_move_server_html_median_ms']:>8.0f}"
        )


def main() -> None:
    parser = common.parser(__doc__ or "")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=10, help="warm loads per page")
    parser.add_argument(
        "--pages", default="", help="comma-separated page names to load (default: every page)"
    )
    common.run_backends(parser.parse_args(), "dashboard", measure, show)


if __name__ == "__main__":
    main()
