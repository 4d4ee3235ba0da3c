"""Oversized bodies get 413 over real HTTP, whether their length is declared or not.

A body sent chunked has no ``Content-Length``: it is counted as it arrives.
FastAPI turns any failure while reading a body into its own 400, so the limit
must win over whatever the app answers once the body was cut off.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.server.http.limits import MAX_BODY_BYTES
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server

TEN_MB = 10 * 1024 * 1024
# Endpoints whose body FastAPI parses into a model, and one that reads the raw body itself.
PATHS = ["/api/v1/runs", "/api/v1/jobs", "/api/v1/runs/crawl/known/fail", "/api/v1/events/batch"]


@pytest.fixture(scope="module", params=["httptools", "h11"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A live server on a SQLite file (the limit does not depend on the store), per parser."""
    tmp: Path = tmp_path_factory.mktemp("body-limit")
    store = Store(f"sqlite:///{tmp / 'data' / 'watchkeeper.db'}")
    settings = make_settings(tmp, store.url)
    runtime = Runtime.open(settings, store=store, notifier=OpsNotifier(settings.ops))
    store.runs.start(NewRun("crawl", "known", "t", None, "none", None, None, 90), utcnow())
    with live_server(runtime, parser=request.param) as live:
        yield live
    runtime.close()


def _json_of(size: int) -> bytes:
    return b'{"title": "' + b"a" * (size - 13) + b'"}'


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def _too_large(response: httpx.Response) -> None:
    assert response.status_code == 413, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert str(MAX_BODY_BYTES) in error["message"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", [TEN_MB, MAX_BODY_BYTES + 1])
def test_a_large_body_with_its_length_declared_gets_413(
    server: LiveServer, path: str, size: int
) -> None:
    body = _json_of(size)
    assert len(body) == size
    with server.client("admin") as http:
        response = http.post(path, content=body, headers={"content-type": "application/json"})
        _too_large(response)
        assert response.request.headers["content-length"] == str(size)
        # The connection stays usable: the rest of the body was discarded, not left unread.
        assert http.get("/api/v1/runs/crawl/known").status_code == 200


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", [TEN_MB, MAX_BODY_BYTES + 1])
def test_a_large_body_sent_chunked_without_a_length_gets_413(
    server: LiveServer, path: str, size: int
) -> None:
    with server.client("admin") as http:
        response = http.post(
            path, content=_chunks(_json_of(size)), headers={"content-type": "application/json"}
        )
        _too_large(response)
        assert "content-length" not in response.request.headers
        assert response.request.headers["transfer-encoding"] == "chunked"
        assert http.get("/api/v1/runs/crawl/known").status_code == 200


def test_a_body_within_the_limit_sent_chunked_is_read(server: LiveServer) -> None:
    body = b'{"reason": "' + b"r" * 1000 + b'", "detail": "' + b"d" * 60_000 + b'"}'
    with server.client("admin") as http:
        response = http.post(
            "/api/v1/runs/crawl/known/fail",
            content=_chunks(body, 4096),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 200, response.text[:300]
    assert response.json()["status"] == "failed"
