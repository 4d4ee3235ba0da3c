"""A stock ``watchkeeper serve`` runs its loops as a supervision tree, calls the ops webhook
through a circuit breaker, and shows both (and its health checks) at /api/v1/supervision."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import patient_http

from ..support.json_server import JsonHandler, JsonServer, answering
from ..support.serving import serving
from ..support.waiting import wait_for
from ..support.web_login import csrf_of, log_in

LOOPS = ["leader-lease", "sweeper", "notifier"]


class BrokenWebhook(JsonHandler):
    """An ops webhook whose server is broken: every POST gets a 503."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.posts += 1  # type: ignore[attr-defined]
        self.send_json(503, {"error": "upstream is down"})


class Webhook(JsonServer):
    posts = 0


@dataclass
class Served:
    """A running server, its admin token and every line it logged."""

    process: subprocess.Popen[str]
    url: str
    token: str
    lines: list[str] = field(default_factory=list)

    def get(self, path: str) -> httpx.Response:
        return patient_http.get(self.url + path, headers=self.auth)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return patient_http.post(self.url + path, headers=self.auth, timeout=30, **kwargs)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def supervision(self) -> dict[str, Any]:
        answer = self.get("/api/v1/supervision")
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def child(self, name: str) -> dict[str, Any]:
        tree = self.supervision()["trees"][0]
        found: dict[str, Any] = next(c for c in tree["children"] if c["name"] == name)
        return found

    def breaker(self, name: str) -> dict[str, Any] | None:
        return next((b for b in self.supervision()["breakers"] if b["name"] == name), None)


@contextmanager
def serve(config: Path) -> Iterator[Served]:
    """``serve`` with ``config``; its log is kept (not only drained) for the test to read,
    and it is stopped gracefully (SIGINT) at the end."""
    lines: list[str] = []
    with serving(config, log=lines) as (process, url, token):
        yield Served(process, url, token, lines)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    with answering(Webhook(("127.0.0.1", 0), BrokenWebhook)) as server:
        yield server


def _config(folder: Path, webhook: Webhook) -> Path:
    config = folder / "watchkeeper.toml"
    config.write_text(
        'data_dir = "data"\ncheck_interval_s = 1\n'
        f'[ops]\nwebhook_url = "{webhook.url}/hook"\nchannels = ["webhook"]\n'
    )
    return config


@pytest.fixture
def served(tmp_path: Path, webhook: Webhook) -> Iterator[Served]:
    """A server of the test's own: for tests that restart, stop or open what it runs."""
    with serve(_config(tmp_path, webhook)) as found:
        yield found


@pytest.fixture(scope="module")
def untouched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server shared by the tests that only read it or are refused (each marked
    ``READ_ONLY``, so all run on one worker): none moves its tree, breaker or checks."""
    with (
        answering(Webhook(("127.0.0.1", 0), BrokenWebhook)) as webhook,
        serve(_config(tmp_path_factory.mktemp("untouched"), webhook)) as found,
    ):
        yield found


READ_ONLY = pytest.mark.xdist_group("serve_supervision_untouched")


@READ_ONLY
def test_a_stock_serve_shows_its_tree_breakers_and_checks(untouched: Served) -> None:
    served = untouched
    tree = wait_for(
        lambda: (t := served.supervision()["trees"][0])["state"] == "running" and t,
        what="the tree running",
    )
    assert (tree["id"], tree["strategy"]) == ("server", "one_for_one")
    assert [c["name"] for c in tree["children"]] == LOOPS
    assert {c["id"] for c in tree["children"]} == {f"server/{name}" for name in LOOPS}
    for child in tree["children"]:
        assert (child["kind"], child["state"], child["restarts"]) == ("worker", "running", 0)
    breaker = served.breaker("notify:webhook")
    assert breaker is not None
    assert (breaker["state"], breaker["node"]) == ("closed", "server/notifier")
    checks = {c["name"]: c for c in served.supervision()["health"]}
    assert {"store", "sweeps", "notifier running"} <= checks.keys()
    assert checks["store"]["status"] == "healthy" and "answered" in checks["store"]["detail"]
    assert checks["notifier running"]["node"] == "server/notifier"


def test_a_failing_webhook_opens_its_breaker_and_the_api_shows_it(
    served: Served, webhook: Webhook
) -> None:
    reporter = served.post("/api/v1/tokens", json={"role": "reporter", "name": "ci"}).json()
    headers = {"Authorization": f"Bearer {reporter['token']}"}
    for n in range(4):
        body = {"kind": "crawl", "run_id": f"crawl-{n}", "title": f"crawl {n}", "effects": "none"}
        started = patient_http.post(
            served.url + "/api/v1/runs", json=body, headers=headers, timeout=10
        )
        assert started.status_code == 201, started.text
        failed = patient_http.post(
            f"{served.url}/api/v1/runs/crawl/crawl-{n}/fail",
            json={"reason": f"disk full {n}", "fingerprint": f"disk-{n}"},
            headers=headers,
            timeout=10,
        )
        assert failed.status_code == 200, failed.text
    opened = wait_for(
        lambda: (b := served.breaker("notify:webhook")) and b["state"] == "open" and b,
        what="the webhook's breaker opening",
    )
    assert opened["failures"] >= 3
    assert webhook.posts == opened["failures"]
    wait_for(
        lambda: any("Circuit breaker notify:webhook: closed -> open" in x for x in served.lines),
        what="the breaker's opening logged",
    )


def test_restarting_and_stopping_a_loop_over_the_api(served: Served) -> None:
    wait_for(lambda: served.child("notifier")["state"] == "running", what="the notifier running")
    restarted = served.post("/api/v1/supervision/children/server/notifier/restart")
    assert restarted.status_code == 200, restarted.text
    assert restarted.json() == {"ok": True, "message": "server/notifier restarted"}
    notifier = served.child("notifier")
    assert (notifier["state"], notifier["restarts"]) == ("running", 1)
    assert notifier["last_exit"] == "shutdown: restart requested"
    assert any("server/notifier restarting on request" in x for x in served.lines)

    stopped = served.post("/api/v1/supervision/children/server/sweeper/stop")
    assert stopped.status_code == 200, stopped.text
    assert served.child("sweeper")["state"] == "stopped"
    wait_for(
        lambda: (
            {c["name"]: c for c in served.supervision()["health"]}["sweeper running"]["status"]
            == "unhealthy"
        ),
        what="the sweeper's check turning unhealthy",
    )

    forced = served.post("/api/v1/supervision/breakers/notify:webhook/open")
    assert forced.status_code == 200, forced.text
    assert (served.breaker("notify:webhook") or {})["state"] == "open"


@READ_ONLY
def test_unknown_ids_are_refused_with_what_there_is(untouched: Served) -> None:
    served = untouched
    missing = served.post("/api/v1/supervision/children/server/nope/restart")
    assert missing.status_code == 404
    message = missing.json()["error"]["message"]
    assert "no supervised child 'server/nope'" in message and "server/notifier" in message
    breaker = served.post("/api/v1/supervision/breakers/nope/open")
    assert breaker.status_code == 404
    assert "notify:webhook" in breaker.json()["error"]["message"]


@READ_ONLY
def test_the_api_needs_a_token_and_actions_need_an_admin(untouched: Served) -> None:
    served = untouched
    assert patient_http.get(served.url + "/api/v1/supervision").status_code == 401
    viewer = served.post("/api/v1/tokens", json={"role": "viewer", "name": "eve"}).json()
    headers = {"Authorization": f"Bearer {viewer['token']}"}
    assert patient_http.get(served.url + "/api/v1/supervision", headers=headers).status_code == 200
    refused = patient_http.post(
        served.url + "/api/v1/supervision/children/server/notifier/stop", headers=headers
    )
    assert refused.status_code == 403


def test_stopping_the_server_stops_the_tree_in_reverse_order(served: Served) -> None:
    wait_for(lambda: served.child("notifier")["state"] == "running", what="the tree running")
    served.process.send_signal(signal.SIGINT)
    assert served.process.wait(timeout=30) == 0
    # The log says which loops stopped: the last started first, the lease last of all.
    stopped = [
        name
        for line in served.lines
        for name in LOOPS
        if f"Loop server/{name} stopped (shutdown" in line
    ]
    assert stopped == ["notifier", "sweeper", "leader-lease"], "".join(served.lines[-30:])


def _login(served: Served, token: str | None = None) -> tuple[httpx.Client, str]:
    """A dashboard session (through the login form) and its CSRF token."""
    web = httpx.Client(base_url=served.url, timeout=30)
    log_in(web, token or served.token)
    return web, csrf_of(web)


def test_the_dashboard_reads_and_acts_with_its_session_and_csrf_token(served: Served) -> None:
    web, csrf = _login(served)
    try:
        shown = web.get("/web/supervision.json")
        assert shown.status_code == 200
        assert [c["name"] for c in shown.json()["trees"][0]["children"]] == LOOPS
        wants_json = {"Accept": "application/json", "X-CSRF-Token": csrf}
        restarted = web.post(
            "/web/supervision/children/server/notifier/restart", headers=wants_json
        )
        assert restarted.status_code == 200, restarted.text
        assert restarted.json() == {"ok": True, "message": "server/notifier restarted"}
        assert served.child("notifier")["restarts"] == 1
        stopped = web.post("/web/supervision/children/server/sweeper/stop", headers=wants_json)
        assert stopped.json()["ok"] is True
        assert served.child("sweeper")["state"] == "stopped"
        opened = web.post("/web/supervision/breakers/notify:webhook/open", headers=wants_json)
        assert opened.json()["ok"] is True
        assert (served.breaker("notify:webhook") or {})["state"] == "open"

        unknown = web.post("/web/supervision/children/server/nope/stop", headers=wants_json)
        assert unknown.status_code == 404
        assert unknown.json()["ok"] is False
        assert "no supervised child 'server/nope'" in unknown.json()["message"]
        no_breaker = web.post("/web/supervision/breakers/nope/open", headers=wants_json)
        assert (no_breaker.status_code, no_breaker.json()["ok"]) == (404, False)

        forged = web.post(
            "/web/supervision/children/server/notifier/restart",
            headers={"Accept": "application/json"},
        )
        assert forged.status_code == 403
        assert "CSRF" in forged.json()["message"]
        assert served.child("notifier")["restarts"] == 1

        # A plain form (no script) is sent back to the page with the answer as a notice.
        form = web.post(
            "/web/supervision/children/server/sweeper/restart",
            data={"csrf": csrf, "back": "/web/topology"},
        )
        assert form.status_code == 303
        assert form.headers["location"].startswith("/web/topology?notice=server%2Fsweeper")
    finally:
        web.close()
    assert patient_http.get(served.url + "/web/supervision.json").status_code in (
        303,
        401,
    )


@READ_ONLY
def test_a_viewers_session_reads_but_does_not_act(untouched: Served) -> None:
    served = untouched
    viewer = served.post("/api/v1/tokens", json={"role": "viewer", "name": "eve"}).json()
    web, csrf = _login(served, viewer["token"])
    try:
        assert web.get("/web/supervision.json").status_code == 200
        refused = web.post(
            "/web/supervision/children/server/notifier/stop",
            headers={"Accept": "application/json", "X-CSRF-Token": csrf},
        )
        assert refused.status_code == 403
        assert refused.json() == {
            "ok": False,
            "message": "only admins act on supervision: @eve is not",
        }
        assert served.child("notifier")["state"] == "running"
    finally:
        web.close()


def test_the_dashboard_stream_tells_when_the_supervision_moves(served: Served) -> None:
    web, _csrf = _login(served)
    seen: list[str] = []
    try:
        with web.stream("GET", "/web/stream", timeout=30) as stream:
            acted = False
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    seen.append(line.removeprefix("event: "))
                if line == "event: hello" and not acted:
                    acted = True
                    stop = served.post("/api/v1/supervision/children/server/sweeper/stop")
                    assert stop.status_code == 200
                elif acted and line == "event: supervision":
                    break
    finally:
        web.close()
    after = seen[seen.index("hello") + 1 :]
    assert "supervision" in after and "topology" in after, seen
