"""An error answer's ``field`` reaches the Python SDK's error, as it reaches the Node SDK's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.client.wire import plain_call
from watchkeeper.errors import ClientError
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_refusal_names_the_field_it_is_about(server: LiveServer) -> None:
    token = server.tokens["admin"]
    with Client(server.url, token) as client, pytest.raises(ClientError) as refused:
        client.jobs.submit("fix", org="o", fleet="cpu", argv=["make"], origin="acme/app#42")
    assert refused.value.status == 422
    assert refused.value.field == "origin"
    with pytest.raises(ClientError) as plain:  # the command line's own transport
        plain_call(
            server.url,
            token,
            "POST",
            "/api/v1/jobs",
            body={
                "title": "fix",
                "org": "o",
                "fleet": "cpu",
                "payload": {"argv": ["make"]},
                "origin": "acme/app#42",
            },
        )
    assert plain.value.field == "origin"
    with Client(server.url, token) as client, pytest.raises(ClientError) as missing:
        client.get_run("crawl", "no-such-run")
    assert missing.value.status == 404 and missing.value.field is None
