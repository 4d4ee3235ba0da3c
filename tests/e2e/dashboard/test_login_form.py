"""The login form in the browser; the other browser tests are handed its session's cookie."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from .conftest import Dashboard


def _session_cookies(page: Any) -> list[dict[str, Any]]:
    """The page's cookies as the browser keeps them, without their values and expiry."""
    kept = page.context.cookies()
    return sorted(
        ({k: v for k, v in cookie.items() if k not in ("value", "expires")} for cookie in kept),
        key=lambda cookie: str(cookie["name"]),
    )


def test_the_login_form_logs_a_browser_in_and_the_tests_cookie_is_the_same(
    dashboard: Dashboard, pages: Any
) -> None:
    through_form = dashboard.login_through_form(pages(), "ana")
    expect(through_form.locator("main h1").first).to_be_visible()
    handed = dashboard.login(pages(), "ana")
    expect(handed.locator("main h1").first).to_be_visible()
    kept = _session_cookies(through_form)
    assert kept, "the form's login left no cookie"
    assert all(cookie["httpOnly"] and cookie["sameSite"] == "Strict" for cookie in kept), kept
    # What the other tests are handed is what the browser keeps after the form.
    assert _session_cookies(handed) == kept
