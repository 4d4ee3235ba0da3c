"""What the canvas tests share: a served app running programs, pages at phone and desktop
size, fingers on a touch screen, and reading what the server holds.

The served app runs two programs in a group and two alone (with a disk and a memory host
check), and process runs started beside them. Each interaction is done once with real
touch at phone size (the browser's own touch events) and once with its keyboard or mouse
twin; each test reads what the user sees and what the server did (``/web/canvas.json``,
the services), never the script's handlers. With ``WK_SCREENSHOTS=1`` each touch test
saves what the phone showed to ``docs/screenshots/canvas-<interaction>.png``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from watchkeeper.clock import ManualClock, utcnow
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.programs import view
from watchkeeper.programs.host import ProgramHost
from watchkeeper.server.app import create_app

from ...integration.recorder import Recorder, recording_server
from .conftest import WAIT_MS, Dashboard, open_runtime, serve
from .world import DESKTOP, PHONE

__all__ = ["clocked", "dashboard", "probed", "unswept"]

CANVAS = "#sup-canvas"
SHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
PROGRAMS = {
    "crawler": {"command": ["sleep", "300"], "group": "crawl", "start_s": 0},
    "parser": {"command": ["sleep", "300"], "group": "crawl", "start_s": 0},
    "indexer": {"command": ["sleep", "300"], "start_s": 0},
    "mailer": {"command": ["sleep", "300"], "start_s": 0},
}
GROUPS = {"crawl": {"strategy": "one_for_one"}}


#: A program that fails at once and waits out a long backoff before each restart.
FLAKY = {
    "command": ["false"],
    "start_s": 0,
    "backoff": {"initial_s": 30, "factor": 2, "max_s": 300, "jitter": 0},
}


class Fingers:
    """Fingers on a touch screen, through the browser's input pipeline.

    Each event carries its own timestamp, so a flick is fast by the clock the page
    reads however slowly the machine delivers it.
    """

    def __init__(self, page: Any) -> None:
        self.cdp = page.context.new_cdp_session(page)
        self.at = time.time()

    def _send(self, kind: str, points: list[tuple[float, float]], after_s: float) -> None:
        self.at += after_s
        touch = [{"x": x, "y": y, "id": i} for i, (x, y) in enumerate(points)]
        self.cdp.send(
            "Input.dispatchTouchEvent",
            {"type": kind, "touchPoints": touch, "timestamp": self.at},
        )

    def down(self, *points: tuple[float, float]) -> None:
        """Put a finger on each point: a gesture starts now, never behind the clock an
        earlier gesture's timestamps ran on (the browser may take a timestamp in the past
        for the time it got the event, and a slow machine would then stretch a flick)."""
        self.at = max(self.at, time.time())
        self._send("touchStart", list(points), 0.0)

    def again(self, *points: tuple[float, float], after_s: float) -> None:
        """Put fingers down ``after_s`` after the last event, on that event's clock (the
        second tap of a double tap)."""
        self._send("touchStart", list(points), after_s)

    def move(self, *points: tuple[float, float], after_s: float = 0.016) -> None:
        """Move the fingers to these points."""
        self._send("touchMove", list(points), after_s)

    def up(self, after_s: float = 0.016) -> None:
        """Lift every finger."""
        self._send("touchEnd", [], after_s)

    def swipe(self, start: tuple[float, float], end: tuple[float, float], ms: float) -> None:
        """One finger from ``start`` to ``end`` in ``ms`` milliseconds, in ten steps."""
        self.down(start)
        for step in range(1, 11):
            x = start[0] + (end[0] - start[0]) * step / 10
            y = start[1] + (end[1] - start[1]) * step / 10
            self.move((x, y), after_s=ms / 10_000)
        self.up(after_s=0.001)


@contextmanager
def serving(
    tmp_path: Path,
    template: Path,
    *,
    sweeps: bool,
    clock: ManualClock | None = None,
    ops: dict[str, Any] | None = None,
    groups: dict[str, Any] | None = None,
) -> Iterator[Dashboard]:
    """The whole server running two programs in the group ``crawl`` (sweeping, unless told
    not to; ``groups`` in place of :data:`GROUPS`); every process run a test started is
    aborted after it.

    With ``clock``, the server's clock and its programs' supervisors' are that one (time
    moves when the test moves it), and the program ``flaky`` waits out its backoff."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(template, data / "watchkeeper.db")
    checks = {
        "disk": {"kind": "disk", "path": str(tmp_path), "min_free_mb": 1, "pauses": ["crawl"]},
        "memory": {"kind": "memory", "min_available_mb": 1, "pauses": ["crawl"]},
    }
    programs = PROGRAMS if clock is None else {**PROGRAMS, "flaky": FLAKY}
    tables: dict[str, Any] = {"programs": programs, "groups": groups or GROUPS}
    tables["host_checks"] = checks
    if ops is not None:
        tables["ops"] = ops
    runtime = open_runtime(data, clock or utcnow, **tables)
    if clock is not None:
        # The runtime's host would count on the monotonic clock; this one counts on the test's.
        runtime.__dict__["programs"] = ProgramHost(
            runtime.settings, runtime.store, clock, supervision_clock=clock
        )
    app = create_app(runtime, run_sweeper=sweeps, run_notifier=True)
    try:
        with serve(app) as url:
            yield Dashboard(url, runtime, app)
    finally:
        for run in runtime.procs.runs():
            runtime.procs.abort(run.run_id, grace_s=0)
        runtime.close()


@pytest.fixture
def dashboard(tmp_path: Path, sqlite_template: Path) -> Iterator[Dashboard]:
    """The served app, sweeping."""
    with serving(tmp_path, sqlite_template, sweeps=True) as served:
        yield served


@pytest.fixture
def unswept(tmp_path: Path, sqlite_template: Path) -> Iterator[Dashboard]:
    """The served app with no sweep: a stale run stays stale until someone reclaims it."""
    with serving(tmp_path, sqlite_template, sweeps=False) as served:
        yield served


@pytest.fixture
def clocked(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[Dashboard, ManualClock]]:
    """The served app on a clock the test moves, with no sweep, and its clock."""
    clock = ManualClock(datetime.now(UTC))
    with serving(tmp_path, sqlite_template, sweeps=False, clock=clock) as served:
        yield served, clock


@pytest.fixture
def probed(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[Dashboard, Recorder]]:
    """The served app posting its ops cards to a webhook that records them, and that
    webhook."""
    with recording_server() as hook:
        ops = {"webhook_url": f"{hook.url}/hook", "channels": ["webhook"]}
        with serving(tmp_path, sqlite_template, sweeps=False, ops=ops) as served:
            yield served, hook


def advance(dashboard: Dashboard, clock: ManualClock, seconds: float) -> None:
    """Move the server's clock on, on the server's own loop (its timers fire there)."""
    loop = dashboard.app.state.supervision.programs.loop
    assert loop is not None

    async def move() -> None:
        clock.advance(seconds)

    asyncio.run_coroutine_threadsafe(move(), loop).result(timeout=30)


#: A finger at phone width and a mouse at desktop width, each in the light and the dark
#: scheme: ``@pytest.mark.parametrize(("phone", "scheme"), CANVAS_LOOKS)``.
CANVAS_LOOKS = [
    pytest.param(True, "light", id="390-touch-light"),
    pytest.param(False, "light", id="1280-mouse-light"),
    pytest.param(True, "dark", id="390-touch-dark"),
    pytest.param(False, "dark", id="1280-mouse-dark"),
]


def canvas_context(browser: Any, opened: list[Any], phone: bool, scheme: str = "light") -> Any:
    """A browser context as the canvas is used: a touch phone or a desktop with a mouse,
    in the light or dark colour scheme."""
    options: dict[str, Any] = {"viewport": DESKTOP, "color_scheme": scheme}
    if phone:
        options.update(viewport=PHONE, has_touch=True, is_mobile=True)
    context = browser.new_context(**options)
    context.set_default_timeout(WAIT_MS)
    opened.append(context)
    return context


def open_canvas(
    dashboard: Dashboard, browser: Any, opened: list[Any], phone: bool, scheme: str = "light"
) -> Any:
    """The canvas, logged in as an admin, drawn: on a touch phone or a desktop."""
    page = dashboard.login(canvas_context(browser, opened, phone, scheme).new_page())
    page.goto(f"{dashboard.url}/web/supervision")
    expect(page.locator(f"{CANVAS} .sn").first).to_be_visible()
    return page


def shot(page: Any, interaction: str) -> None:
    """What the phone shows now, saved for the docs when ``WK_SCREENSHOTS=1``."""
    if os.environ.get("WK_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"canvas-{interaction}.png"))


def canvas_json(page: Any, dashboard: Dashboard) -> dict[str, Any]:
    """What the server answers the canvas now (``GET /web/canvas.json``)."""
    response = page.request.get(f"{dashboard.url}/web/canvas.json")
    assert response.ok, response.status
    found: dict[str, Any] = response.json()
    return found


def run_card(page: Any, dashboard: Dashboard, run_id: str) -> dict[str, Any]:
    """One run's card as the server answers it."""
    return next(r for r in canvas_json(page, dashboard)["runs"] if r["id"] == run_id)


def launch(dashboard: Dashboard, tmp_path: Path, *argv: str) -> str:
    """A process run started on the server's host, as ``watchkeeper run`` starts one."""
    request = LaunchRequest(tuple(argv), cwd=str(tmp_path), name="canvas test", detach=True)
    return dashboard.runtime.procs.start(request).run.run_id


def on_canvas(page: Any, selector: str) -> Any:
    """The node, brought into view as Tab brings it (focused, the canvas pans to it)."""
    found = page.locator(f"{CANVAS} .sn{selector}")
    expect(found).to_have_count(1)
    found.focus()
    return found


def fact(page: Any, term: str) -> Any:
    """The value of the details panel's fact ``term``."""
    return page.locator(f"#sup-panel dt:text-is('{term}') + dd")


def double_tap(page: Any, point: tuple[float, float]) -> None:
    """Two quick taps on ``point`` (150 ms apart by the events' own clock)."""
    fingers = Fingers(page)
    fingers.down(point)
    fingers.up(after_s=0.05)
    fingers.again(point, after_s=0.1)
    fingers.up(after_s=0.05)


def post_as_page(
    page: Any, dashboard: Dashboard, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    """A post as the page makes it: the session's cookie and CSRF token."""
    token = page.locator('meta[name="csrf-token"]').get_attribute("content")
    response = page.request.post(
        f"{dashboard.url}{path}",
        data=body,
        headers={"X-CSRF-Token": token or "", "Accept": "application/json"},
    )
    found: dict[str, Any] = response.json()
    return found


def program_state(dashboard: Dashboard, name: str) -> str:
    """A program's state as the server shows it."""
    programs = dashboard.app.state.supervision.programs
    return str(view.program(programs, name)["state"])
