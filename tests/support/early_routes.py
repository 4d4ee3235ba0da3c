"""Checks shared by the routes answered ahead of the middleware chain."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx

from tests.support.live_server import LiveServer

#: What a caller relies on in an answer: status, content type, ``WWW-Authenticate``, body.
Seen = tuple[int, str | None, str | None, Any]


def seen(response: httpx.Response, body: Any) -> Seen:
    """The answer as a caller relies on it, with ``body`` as the caller reads it."""
    return (
        response.status_code,
        response.headers.get("content-type"),
        response.headers.get("www-authenticate"),
        body,
    )


def answered_alike(
    server: LiveServer,
    early: type,
    answers: Callable[[LiveServer], list[Seen]],
    cases: Sequence[Any],
) -> list[Seen]:
    """Assert that every case is answered the same with the server's one ``early`` route and
    with the documented route alone; the documented route's answers."""
    assert server.server is not None
    routes = server.server.config.app.router.routes
    taken = [route for route in routes if isinstance(route, early)]
    assert len(taken) == 1
    taken_ahead = answers(server)
    routes.remove(taken[0])
    documented = answers(server)
    for case, ours, reference in zip(cases, taken_ahead, documented, strict=True):
        assert ours == reference, (case, ours, reference)
    return documented
