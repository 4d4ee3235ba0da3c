"""A real server with the dashboard, and a real headless Chromium driven by Playwright.

Chromium is Debian's ``/usr/bin/chromium`` (never a downloaded build). Without
it, or without Playwright, the browser tests skip locally and fail under CI.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookiejar import Cookie
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from watchkeeper.clock import Now, utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.server.app import create_app
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from ...conftest import make_settings
from ...support.live_server import free_port, in_thread
from ...support.web_login import session

CHROMIUM = os.environ.get("WATCHKEEPER_CHROMIUM", "/usr/bin/chromium")
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
#: Generous for a shared two-core machine; Playwright's expect() returns as soon as it holds.
WAIT_MS = 15_000
PRICES = {"acme-ai/coder-1": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}
KINDS = {
    "crawl": {"actions": {"retry": {"entry_point": "tests.e2e.dashboard.actions:retry"}}},
}


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"Chromium is not installed at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install playwright)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module; every test opens its own contexts.

    Not per session: Playwright's synchronous API keeps an event loop running in the
    main thread while it is open, and every other test on the same worker that runs
    ``asyncio.run`` would find it there.
    """
    problem = _missing()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the dashboard's browser tests must run under CI: {problem}")
        pytest.skip(problem)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Dashboard:
    """A served app, its runtime, and an API token for each name."""

    url: str
    runtime: Runtime
    app: FastAPI
    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, name: str, role: Role = Role.ADMIN) -> str:
        """An API token named ``name`` (made once)."""
        if name not in self.tokens:
            _info, secret = self.runtime.store.tokens.create(role, name, self.runtime.clock())
            self.tokens[name] = secret
        return self.tokens[name]

    def login(self, page: Any, name: str = "ana", role: Role = Role.ADMIN) -> Any:
        """Log ``page`` in as ``name`` and open the home page.

        The session is made through the login form over HTTP and its cookie handed to the
        page's browser context, as the browser would have kept it: rendering the form in the
        browser took about two thirds of a second a test (:meth:`login_through_form` does,
        for the tests of the form itself).
        """
        from playwright.sync_api import expect

        with session(self.url, self.token(name, role)) as web:
            cookies = [_for_the_browser(cookie) for cookie in web.cookies.jar]
        page.context.add_cookies(cookies)
        page.goto(f"{self.url}/web/")
        expect(page.locator("header .who")).to_contain_text(f"@{name}")
        return page

    def login_through_form(self, page: Any, name: str = "ana", role: Role = Role.ADMIN) -> Any:
        """Log ``page`` in through the login form, in the browser."""
        from playwright.sync_api import expect

        page.goto(f"{self.url}/web/")
        expect(page).to_have_url(re.compile(r"/web/login"))
        page.fill("#token", self.token(name, role))
        page.click("button[type=submit]")
        expect(page.locator("header .who")).to_contain_text(f"@{name}")
        return page


def _for_the_browser(cookie: Cookie) -> dict[str, Any]:
    """A cookie of httpx's jar as Playwright adds it to a browser context."""
    return {
        "name": cookie.name,
        "value": cookie.value or "",
        "domain": cookie.domain,
        "path": cookie.path,
        "secure": cookie.secure,
        "httpOnly": cookie.has_nonstandard_attr("HttpOnly"),
        "sameSite": (cookie.get_nonstandard_attr("SameSite") or "Lax").capitalize(),
    }


@contextmanager
def serve(app: FastAPI, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` on loopback (a free port unless given) until the block ends.

    Stopping gives open streams two seconds, as a restart that does not wait for them.
    """
    port = port or free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    with in_thread(config, "the dashboard test server", stop_s=30):
        yield f"http://127.0.0.1:{port}"


def open_runtime(data: Path, clock: Now = utcnow, **overrides: Any) -> Runtime:
    """A runtime on SQLite in ``data`` with the test kinds and prices (the real clock unless
    told)."""
    data.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{data / 'watchkeeper.db'}"
    settings = make_settings(data.parent, url, kinds=KINDS, prices=PRICES, **overrides)
    return Runtime.open(settings, clock=clock, store=Store(url), notifier=OpsNotifier(settings.ops))


@pytest.fixture
def dashboard(tmp_path: Path, sqlite_template: Path) -> Iterator[Dashboard]:
    """The whole server (sweep loop included) with the dashboard, on a fresh SQLite file."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "watchkeeper.db")
    runtime = open_runtime(data)
    app = create_app(runtime, run_sweeper=True)
    try:
        with serve(app) as url:
            yield Dashboard(url, runtime, app)
    finally:
        runtime.close()


#: The four ways the dashboard is seen: a desktop's width and a phone's, light and dark. A
#: test of what a page does takes ``@pytest.mark.parametrize("look", LOOKS, indirect=True)``
#: to run in each; without it, it runs at 1280 px in light.
LOOKS = [
    pytest.param(({"width": 1280, "height": 900}, "light"), id="1280-light"),
    pytest.param(({"width": 1280, "height": 900}, "dark"), id="1280-dark"),
    pytest.param(({"width": 390, "height": 844}, "light"), id="390-light"),
    pytest.param(({"width": 390, "height": 844}, "dark"), id="390-dark"),
]
#: Both widths and both schemes in two runs, for the tests that take longest (a server
#: stopped and started again, a stream's reconnect waited for).
LOOK_CORNERS = [LOOKS[0], LOOKS[3]]


@pytest.fixture
def look(request: pytest.FixtureRequest) -> tuple[dict[str, int], str]:
    """The viewport and colour scheme of the pages :func:`pages` opens."""
    found: tuple[dict[str, int], str] = getattr(request, "param", LOOKS[0].values[0])
    return found


@pytest.fixture
def pages(browser: Any, look: tuple[dict[str, int], str]) -> Iterator[Any]:
    """A factory of pages, each in its own browser context (its own cookies); closed after."""
    contexts: list[Any] = []
    viewport, scheme = look

    def new_page() -> Any:
        context = browser.new_context(viewport=viewport, color_scheme=scheme)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        return context.new_page()

    yield new_page
    for context in contexts:
        context.close()


@pytest.fixture
def contexts(browser: Any) -> Iterator[list[Any]]:
    """Browser contexts a test opens; closed after it."""
    opened: list[Any] = []
    yield opened
    for context in opened:
        context.close()
