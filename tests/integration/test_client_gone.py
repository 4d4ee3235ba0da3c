"""A client that goes away while its body is read is a client gone, not a server failure.

A runner killed in the middle of a timeline post used to leave a traceback
("Unexpected failure answering a request") in the server's log each time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from watchkeeper.runtime import Runtime

from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for
from .test_slow_clients import _connect, _request


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def test_a_client_that_leaves_mid_body_is_logged_as_gone(
    server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper")
    head = _request(
        "/api/v1/events/batch",
        method="POST",
        Authorization=f"Bearer {server.tokens['reporter']}",
        Content_Type="application/json",
        Content_Length="1000",
    )
    with _connect(server) as sock:
        sock.sendall(head + b'{"events": [')  # then the client dies
    wait_for(
        lambda: any("went away" in r.getMessage() for r in caplog.records),
        what="the server to notice the client went away",
    )
    assert not [r for r in caplog.records if "Unexpected failure" in r.getMessage()]
