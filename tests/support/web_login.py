"""A plain HTTP client logged in to the dashboard through its login form, as a browser is.

Values are read from the page as a browser reads them (character references decoded): the
server prints its own tokens as references when they look like a secret, so that the
page's redaction leaves them whole.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from .waiting import TIMEOUT_S


def page_value(pattern: str, text: str) -> str:
    """The first group of ``pattern`` in ``text``, as the browser reads it."""
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} is not on the page: {text[:300]}"
    return html.unescape(found[1])


def csrf_of(web: httpx.Client) -> str:
    """The session's CSRF token, from the home page's meta tag."""
    return page_value(r'name="csrf-token" content="([^"]+)"', web.get("/web/").text)


def log_in(web: httpx.Client, token: str) -> None:
    """Log ``web`` in with ``token`` through the login form (its nonce included)."""
    nonce = page_value(r'name="nonce" value="([^"]+)"', web.get("/web/login").text)
    answer = web.post("/web/login", data={"token": token, "nonce": nonce})
    assert answer.status_code == 303, answer.text
    assert "notice" not in answer.headers["location"], answer.headers["location"]


@contextmanager
def session(url: str, token: str) -> Iterator[httpx.Client]:
    """A client logged in with ``token`` at ``url``."""
    with httpx.Client(base_url=url, timeout=TIMEOUT_S) as web:
        log_in(web, token)
        yield web


@contextmanager
def logged_in(url: str, token: str) -> Iterator[tuple[httpx.Client, str]]:
    """A client logged in with ``token`` at ``url``, and its session's CSRF token."""
    with session(url, token) as web:
        yield web, csrf_of(web)
