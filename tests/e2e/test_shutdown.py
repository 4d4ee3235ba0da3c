"""``watchkeeper serve`` stops promptly on SIGTERM, even with event streams open."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from watchkeeper.server.http.longpoll import PER_TOKEN

from ..support.serving import serving
from ..support.waiting import wait_for
from ..support.web_login import page_value
from .test_cli import config_file  # noqa: F401  (fixture)

#: Far below the five minutes a stream used to hold a stopping server, far above a prompt stop.
EXITS_WITHIN_S = 20.0


@pytest.fixture
def server(config_file: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:  # noqa: F811
    with serving(config_file) as started:
        yield started


class _Reader:
    """Reads an open event stream to its end in a thread; says what it saw."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()
        self.ended = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)

    def first(self, prefix: str) -> None:
        """Read in this thread until a line starting with ``prefix``, then read on in the other."""
        for line in self.lines:
            if line.startswith(prefix):
                self.thread.start()
                return
        raise AssertionError(f"the stream ended before a line starting {prefix!r}")

    def _read(self) -> None:
        try:
            for _ in self.lines:
                pass
        except httpx.HTTPError as error:  # a cut connection, not an ended stream
            self.error = error
        self.ended.set()


def _login(web: httpx.Client, token: str) -> None:
    nonce = page_value(r'name="nonce" value="([^"]+)"', web.get("/web/login").text)
    answer = web.post("/web/login", data={"token": token, "nonce": nonce})
    assert answer.status_code in (200, 303), answer.text


def test_sigterm_ends_open_streams_and_the_server_exits(
    server: tuple[subprocess.Popen[str], str, str],
) -> None:
    process, url, token = server
    auth = {"Authorization": f"Bearer {token}"}
    # No read timeout: a stream that is never ended would hold the reader, not fail it.
    timeout = httpx.Timeout(10, read=None)
    with (
        httpx.Client(base_url=url, headers=auth, timeout=timeout) as api,
        httpx.Client(base_url=url, timeout=timeout) as web,
    ):
        _login(web, token)
        with (
            api.stream("GET", "/api/v1/events") as events,
            web.stream("GET", "/web/stream") as page,
        ):
            assert events.status_code == 200 and page.status_code == 200
            readers = [_Reader(events), _Reader(page)]
            readers[0].first(": subscribed")
            readers[1].first("event: hello")
            process.send_signal(signal.SIGTERM)
            # The old server held the streams (and so its exit) for minutes: this times out.
            assert process.wait(timeout=EXITS_WITHIN_S) == 0
            for reader in readers:
                assert reader.ended.wait(timeout=EXITS_WITHIN_S), "a stream never ended"
                assert reader.error is None, f"a stream was cut, not ended: {reader.error!r}"


def _kill_run(run: dict[str, object]) -> None:
    """The detached command outlives the server on purpose; the test ends it."""
    for key in ("pid", "shim_pid"):
        pid = run.get(key)
        if isinstance(pid, int):
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()


def test_sigterm_ends_a_held_long_poll_and_the_server_exits(
    server: tuple[subprocess.Popen[str], str, str], request: pytest.FixtureRequest
) -> None:
    process, url, token = server
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=auth, timeout=httpx.Timeout(10, read=60)) as api:
        started = api.post("/api/v1/procs", json={"argv": ["sleep", "300"], "detach": True})
        assert started.status_code in (200, 201), started.text
        run_id = started.json()["id"]
        request.addfinalizer(lambda: _kill_run(started.json()))
        wait_path = f"/api/v1/procs/{run_id}/wait"
        answers: list[httpx.Response] = []

        def hold() -> None:
            while True:  # a probe below may take the last place for a moment: ask again
                answer = api.get(wait_path, params={"timeout_s": 30})
                if answer.status_code != 429:
                    answers.append(answer)
                    return

        held = [threading.Thread(target=hold, daemon=True) for _ in range(PER_TOKEN)]
        for thread in held:
            thread.start()
        # A token's waits are capped: once one more is refused, all of them are being held.
        wait_for(
            lambda: api.get(wait_path, params={"timeout_s": 0}).status_code == 429,
            what="every long-poll of the token to be held",
        )
        process.send_signal(signal.SIGTERM)
        # They used to hold the stop for their whole 30 s.
        assert process.wait(timeout=EXITS_WITHIN_S) == 0
        for thread in held:
            thread.join(timeout=EXITS_WITHIN_S)
        assert len(answers) == PER_TOKEN
        for answer in answers:
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "running"  # not ended: the client asks again
