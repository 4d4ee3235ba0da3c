"""An id the SDK sends is one segment of the URL's path: a ``?``, ``#``, ``/`` or ``..`` in
it names that id, never another route nor a query string."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.errors import ClientError
from watchkeeper.runtime import Runtime


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        with Client(live.url, live.tokens["reporter"]) as reporter:
            reporter.start("crawl", "the real one", run_id="r-1")
        yield live


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("run_id", ["r-1?all=true", "r-1#x", "r-1/..", "..", "."])
def test_an_id_with_url_characters_names_no_other_run(server: LiveServer, run_id: str) -> None:
    with Client(server.url, server.tokens["admin"]) as client:
        assert client.get_run("crawl", "r-1")["title"] == "the real one"
        with pytest.raises(ClientError) as refused:
            client.get_run("crawl", run_id)
        with pytest.raises(ClientError):
            client.progress("crawl", run_id, "moved?")
        assert client.get_run("crawl", "r-1")["step"] is None  # r-1 did not move
    assert refused.value.status in {404, 422}, refused.value


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_job_id_of_dots_is_not_the_job_list(server: LiveServer) -> None:
    client = Client(server.url, server.tokens["admin"])
    with client, pytest.raises(ClientError) as refused:
        client.jobs.get("..")
    assert refused.value.status in {404, 422}
