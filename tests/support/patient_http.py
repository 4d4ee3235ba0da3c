"""One-off HTTP calls that wait as long as the suite's other waits.

httpx's own default gives up after 5 s, which on a loaded 2-core runner judges the
machine's speed rather than the server's behaviour: a call made here fails only when
the server never answers within the suite's common bound.
"""

from __future__ import annotations

from typing import Any

import httpx

from .waiting import TIMEOUT_S


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """``httpx.request`` with the suite's bound as its default timeout."""
    kwargs.setdefault("timeout", TIMEOUT_S)
    return httpx.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    """``httpx.get`` with the suite's bound as its default timeout."""
    return request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    """``httpx.post`` with the suite's bound as its default timeout."""
    return request("POST", url, **kwargs)
