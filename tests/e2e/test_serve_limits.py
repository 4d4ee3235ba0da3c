"""``watchkeeper serve`` itself drops silent clients and caps held requests by default."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from .test_cli import config_file, served  # noqa: F401  (fixtures)

#: Well past the default header timeout (10 s): a socket open by then was never dropped.
CLOSED_WITHIN_S = 40.0


def test_serve_closes_a_silent_connection(served: tuple[str, str]) -> None:  # noqa: F811
    url, _token = served
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(CLOSED_WITHIN_S)
        assert sock.recv(1024) == b"", "the server never closed a connection that sent nothing"


def test_serve_caps_one_tokens_long_polls(served: tuple[str, str]) -> None:  # noqa: F811
    url, token = served
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=auth, timeout=120) as http:
        started = http.post("/api/v1/procs", json={"argv": ["sleep", "600"]})
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        wait = f"/api/v1/procs/{run_id}/wait"

        def hold() -> httpx.Response:
            # A probe below may hold a place for a moment (429), and on a loaded machine a
            # wait may time out before the abort comes: either way, wait again.
            give_up = time.monotonic() + 110
            while True:
                answer = http.get(wait, params={"timeout_s": 30})
                running = answer.status_code == 200 and answer.json()["status"] == "running"
                if (answer.status_code != 429 and not running) or time.monotonic() > give_up:
                    return answer

        with ThreadPoolExecutor(8) as pool:
            held = [pool.submit(hold) for _ in range(8)]
            deadline = time.monotonic() + 30
            while True:  # the held ones reach the server in their own time
                refused = http.get(wait, params={"timeout_s": 0})
                if refused.status_code == 429 or time.monotonic() > deadline:
                    break
            assert refused.status_code == 429, refused.text
            assert "8 long-polls" in refused.json()["error"]["message"]
            assert refused.headers["retry-after"]
            aborted = http.post(f"/api/v1/procs/{run_id}/abort", json={"grace_s": 1})
            assert aborted.status_code == 200, aborted.text
            assert {f.result().json()["status"] for f in held} == {"cancelled"}
