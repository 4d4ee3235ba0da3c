"""A real ``watchkeeper serve`` says on ``/healthz`` when it judges nothing, names why, and
``doctor`` exits non-zero then: a stopped sweeper, every paging channel's breaker open, a
store that refuses writes. Each answers as docs/supervision.md says, and health comes back
once the fault is gone.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import patient_http

from ..support.cli import wk
from ..support.json_server import JsonHandler, JsonServer, answering
from ..support.serving import serving
from ..support.waiting import wait_for


class Hook(JsonHandler):
    """An ops webhook that takes every message."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_json(200, {"ok": True})


@pytest.fixture
def webhook() -> Iterator[JsonServer]:
    with answering(JsonServer(("127.0.0.1", 0), Hook)) as server:
        yield server


def _config(folder: Path, extra: str = "") -> Path:
    config = folder / "watchkeeper.toml"
    config.write_text(f'data_dir = "{folder / "data"}"\ncheck_interval_s = 1\n{extra}')
    return config


def _health(url: str) -> tuple[int, dict[str, Any]]:
    answer = patient_http.get(url + "/healthz")
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


def _ok(url: str) -> bool:
    code, body = _health(url)
    return code == 200 and body["status"] == "ok"


def _doctor(config: Path, url: str, token: str) -> subprocess.CompletedProcess[str]:
    done = wk("--config", str(config), "doctor", "--server", url, "--token", token)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def _post(url: str, token: str, path: str, body: Any = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return patient_http.post(url + path, json=body, headers=headers, timeout=30)


def test_a_stopped_sweeper_fails_health_and_doctor_until_it_runs_again(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with serving(config) as (_process, url, token):
        code, body = _health(url)
        assert (code, body["status"]) == (200, "ok"), body
        assert not body.get("causes"), body
        healthy = _doctor(config, url, token)
        assert healthy.returncode == 0, healthy.stdout

        stopped = _post(url, token, "/api/v1/supervision/children/server/sweeper/stop")
        assert stopped.status_code == 200, stopped.text
        code, body = _health(url)
        assert (code, body["status"]) == (503, "failing"), body
        loops = [c for c in body["causes"] if c["check"] == "loops"]
        assert [c["status"] for c in loops] == ["failing"], body
        assert loops[0]["detail"].startswith("server/sweeper is stopped: nothing sweeps")
        assert "server/sweeper is stopped" in body["error"]

        sick = _doctor(config, url, token)
        assert sick.returncode == 1, sick.stdout
        assert "server/sweeper is stopped" in sick.stdout

        restarted = _post(url, token, "/api/v1/supervision/children/server/sweeper/restart")
        assert restarted.status_code == 200, restarted.text
        wait_for(lambda: _ok(url), what="health ok once the sweeper runs again")


def test_every_paging_channel_open_is_degraded_and_doctor_says_so(
    tmp_path: Path, webhook: JsonServer
) -> None:
    config = _config(
        tmp_path, f'[ops]\nwebhook_url = "{webhook.url}/hook"\nchannels = ["webhook"]\n'
    )
    with serving(config) as (_process, url, token):
        code, body = _health(url)
        assert (code, body["status"]) == (200, "ok"), body
        opened = _post(url, token, "/api/v1/supervision/breakers/notify:webhook/open")
        assert opened.status_code == 200, opened.text
        code, body = _health(url)
        # It still judges and records: a restart would not bring the platform back.
        assert (code, body["status"]) == (200, "degraded"), body
        assert [(c["check"], c["status"]) for c in body["causes"]] == [("paging", "degraded")]
        detail = body["causes"][0]["detail"]
        assert detail.startswith("no paging channel can deliver") and "notify:webhook" in detail
        sick = _doctor(config, url, token)
        assert sick.returncode == 1, sick.stdout
        assert "no paging channel can deliver" in sick.stdout


def test_a_store_that_refuses_writes_fails_health_for_the_whole_fault(tmp_path: Path) -> None:
    """The disk fills up under a running server: its file-size limit (RLIMIT_FSIZE, as
    ``ulimit -f`` sets it) is lowered to 0 while it runs, with prlimit(2).

    The kernel then refuses every write to a regular file past the limit (EFBIG, where
    a full file system answers ENOSPC), so SQLite's WAL appends and checkpoints fail
    and every write transaction is refused ("disk I/O error"), while reads, served from
    the pages and the memory-mapped index already there, answer as before: the fault
    users saw. Raising the limit again frees the "disk".
    """
    config = _config(tmp_path)
    lines: list[str] = []
    with serving(config, log=lines) as (process, url, token):
        assert _health(url)[0] == 200
        before = resource.prlimit(process.pid, resource.RLIMIT_FSIZE)
        run = {"kind": "crawl", "run_id": "c-1", "title": "crawl 1"}
        resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (0, before[1]))
        try:
            refused = _post(url, token, "/api/v1/runs", run)
            assert refused.status_code == 503, refused.text
            listed = patient_http.get(
                url + "/api/v1/runs", headers={"Authorization": f"Bearer {token}"}, timeout=10
            )
            assert listed.status_code == 200, listed.text

            seen: list[tuple[int, dict[str, Any]]] = []

            def watched_past_the_lease() -> bool:
                seen.append(_health(url))
                # Ten failed lease ticks: the lease lapsed, and lapsed for longer than a lease.
                return sum("Leader lease tick failed" in line for line in lines) >= 10

            wait_for(watched_past_the_lease, what="the fault outlasting the leader lease")
            # From the first refused write to the end: failing at every look, never 200.
            assert [code for code, _ in seen] == [503] * len(seen), [
                (code, body["status"], body.get("error")) for code, body in seen
            ]
            assert all(body["status"] == "failing" for _, body in seen)
            for _, body in seen:
                store = [c for c in body["causes"] if c["check"] == "store"]
                assert store and store[0]["detail"].startswith("the store refuses writes"), body
            # The leader lease lapsed while it was watched (where it used to answer 200 again).
            assert any(not body["cluster"]["leader_alive"] for _, body in seen)
            sick = _doctor(config, url, token)
            assert sick.returncode == 1, sick.stdout
            assert "the store refuses writes" in sick.stdout
        finally:
            with contextlib.suppress(ProcessLookupError):
                resource.prlimit(process.pid, resource.RLIMIT_FSIZE, before)
        wait_for(lambda: _ok(url), what="health ok once writes go through")
        assert _post(url, token, "/api/v1/runs", run).status_code == 201
