"""Values a store column cannot hold get a 422 naming the field, never a 500.

Over real HTTP, on SQLite and PostgreSQL: NUL in every text field of the
report, queue, process and timeline requests; integers beyond the columns'
32 bits (PostgreSQL ``INTEGER``) and beyond 64 bits (what SQLite's driver
binds); and the store's own second line when a value slips past the API.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from watchkeeper import errors
from watchkeeper.clock import utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.records.queue import NewRunner
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.runs import NewRun

from ..conftest import make_settings, truncate_all
from ..support.live_server import LiveServer, live_server

NUL = "bad\x00value"
INT32_PAST = 2**31
INT64_PAST = 2**70


@dataclass
class Api:
    """A live server on one store, with a run, a job, a runner and a live lease."""

    server: LiveServer
    http: httpx.Client
    job_id: str
    task_id: str
    runner_id: str
    lease_token: str

    def lease_again(self) -> None:
        """Take a fresh lease, in case an earlier request ended the last one."""
        job = self.http.post(
            "/api/v1/jobs",
            json={"title": "j", "org": "o", "fleet": "cpu", "payload": {"argv": ["true"]}},
        ).json()
        leased = self.http.post(f"/api/v1/runners/{self.runner_id}/lease", json={"max": 1}).json()
        self.job_id = job["id"]
        self.task_id = leased["tasks"][0]["id"]
        self.lease_token = leased["tasks"][0]["lease_token"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One server per store for the whole module: every request here is refused."""
    tmp = tmp_path_factory.mktemp("bad-input")
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        (tmp / "data").mkdir()
        shutil.copy(template, tmp / "data" / "watchkeeper.db")
        url = f"sqlite:///{tmp / 'data' / 'watchkeeper.db'}"
    else:
        url = request.getfixturevalue("pg_schema_url")
        truncate_all(url)
    store = Store(url)
    settings = make_settings(tmp, url)
    runtime = Runtime.open(settings, store=store, notifier=OpsNotifier(settings.ops))
    store.runs.start(NewRun("crawl", "known", "t", None, "none", None, None, 90), utcnow())
    with live_server(runtime) as server, server.client() as http:
        runner = http.post(
            "/api/v1/runners", json={"fleet": "cpu", "host": "h", "pid": 7, "capacity": 1000}
        ).json()
        found = Api(server, http, "", "", runner["id"], "")
        found.lease_again()
        yield found
    runtime.close()


def refused_on(response: httpx.Response, field: str) -> bool:
    """Whether ``response`` is the API's 422 ``invalid`` answer naming ``field``."""
    if response.status_code != 422:
        return False
    error = response.json()["error"]
    return bool(error["code"] == "invalid" and field in error["message"])


# (name, method, path, body) with the bad value in the named field; paths may name the
# fixture's ids as {job_id}, {task_id}, {runner_id}, {lease_token}.
Case = tuple[str, str, str, Callable[[str], Any]]

NUL_CASES: list[Case] = [
    # Reports (push runs)
    ("title", "POST", "/api/v1/runs", lambda v: {"kind": "crawl", "run_id": "n1", "title": v}),
    *[
        (
            key,
            "POST",
            "/api/v1/runs",
            lambda v, key=key: {
                "kind": "crawl",
                "run_id": "n2",
                "title": "t",
                "origin": {"platform": "slack", key: v},
            },
        )
        for key in ("chat_id", "thread_id", "message_id")
    ],
    ("step", "POST", "/api/v1/runs/crawl/known/progress", lambda v: {"step": v}),
    ("reason", "POST", "/api/v1/runs/crawl/known/waiting", lambda v: {"reason": v}),
    ("step", "POST", "/api/v1/runs/crawl/known/finish", lambda v: {"step": v}),
    ("reason", "POST", "/api/v1/runs/crawl/known/fail", lambda v: {"reason": v}),
    (
        "fingerprint",
        "POST",
        "/api/v1/runs/crawl/known/fail",
        lambda v: {"reason": "r", "fingerprint": v},
    ),
    ("detail", "POST", "/api/v1/runs/crawl/known/fail", lambda v: {"reason": "r", "detail": v}),
    ("name", "POST", "/api/v1/tokens", lambda v: {"role": "viewer", "name": v}),
    # Queue
    (
        "title",
        "POST",
        "/api/v1/jobs",
        lambda v: {"title": v, "org": "o", "fleet": "cpu", "payload": {"argv": ["true"]}},
    ),
    (
        "payload",
        "POST",
        "/api/v1/jobs",
        lambda v: {"title": "t", "org": "o", "fleet": "cpu", "payload": {"argv": ["true", v]}},
    ),
    ("payload", "POST", "/api/v1/jobs/{job_id}/resume", lambda v: {"payload": {"argv": [v]}}),
    ("host", "POST", "/api/v1/runners", lambda v: {"fleet": "cpu", "host": v, "pid": 1}),
    (
        "name",
        "POST",
        "/api/v1/runners",
        lambda v: {"fleet": "cpu", "host": "h", "pid": 1, "name": v},
    ),
    ("lease_token", "POST", "/api/v1/tasks/{task_id}/renew", lambda v: {"lease_token": v}),
    (
        "step",
        "POST",
        "/api/v1/tasks/{task_id}/renew",
        lambda v: {"lease_token": "{lease_token}", "step": v},
    ),
    ("lease_token", "POST", "/api/v1/tasks/{task_id}/complete", lambda v: {"lease_token": v}),
    (
        "lease_token",
        "POST",
        "/api/v1/tasks/{task_id}/fail",
        lambda v: {"lease_token": v, "reason": "r"},
    ),
    (
        "reason",
        "POST",
        "/api/v1/tasks/{task_id}/fail",
        lambda v: {"lease_token": "{lease_token}", "reason": v},
    ),
    (
        "fingerprint",
        "POST",
        "/api/v1/tasks/{task_id}/fail",
        lambda v: {"lease_token": "{lease_token}", "reason": "r", "fingerprint": v},
    ),
    # Processes
    ("argv", "POST", "/api/v1/procs", lambda v: {"argv": [v]}),
    *[
        (key, "POST", "/api/v1/procs", lambda v, key=key: {"argv": ["true"], key: v})
        for key in ("cwd", "name", "session", "on_done_cmd")
    ],
    (
        "on_done_url",
        "POST",
        "/api/v1/procs",
        lambda v: {"argv": ["true"], "on_done_url": "http://" + v},
    ),
    (
        "session",
        "POST",
        "/api/v1/procs/parks",
        lambda v: {"session": v, "reason": "r", "until": "p-1"},
    ),
    (
        "reason",
        "POST",
        "/api/v1/procs/parks",
        lambda v: {"session": "s", "reason": v, "until": "p-1"},
    ),
    (
        "wake_cmd",
        "POST",
        "/api/v1/procs/parks",
        lambda v: {"session": "s", "reason": "r", "until": "p-1", "wake_cmd": v},
    ),
    (
        "progress",
        "POST",
        "/api/v1/procs/parks",
        lambda v: {"session": "s", "reason": "r", "until": "p-1", "progress": v},
    ),
    ("note", "POST", "/api/v1/procs/sessions/s/progress", lambda v: {"note": v}),
    ("session", "POST", "/api/v1/procs/sessions/bad%00value/progress", lambda v: {"note": "n"}),
    ("step", "POST", "/api/v1/procs/p-1/progress", lambda v: {"step": v}),
    # Timeline
    *[
        (
            key,
            "POST",
            "/api/v1/events/batch",
            lambda v, key=key: {"events": [{"phase": "tool", key: v}]},
        )
        for key in ("name", "rationale", "detail")
    ],
    # Decisions
    (
        "state_token",
        "POST",
        "/api/v1/incidents/1/decide",
        lambda v: {"action": "dismiss", "state_token": v},
    ),
]


def _fill(api: Api, value: Any) -> Any:
    ids = {"job_id": api.job_id, "task_id": api.task_id, "runner_id": api.runner_id}
    ids["lease_token"] = api.lease_token
    if isinstance(value, str):
        return value.format(**ids) if "{" in value else value
    if isinstance(value, dict):
        return {key: _fill(api, item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(api, item) for item in value]
    return value


@pytest.mark.parametrize(
    ("field", "method", "path", "body"),
    NUL_CASES,
    ids=[f"{path.rsplit('/', 1)[-1] or path}-{field}" for field, _, path, _ in NUL_CASES],
)
def test_nul_in_a_text_field_is_refused(
    api: Api, field: str, method: str, path: str, body: Callable[[str], Any]
) -> None:
    response = api.http.request(method, _fill(api, path), json=_fill(api, body(NUL)))
    assert refused_on(response, field), response.text
    assert "control character" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/incidents/{INT32_PAST}",
        f"/api/v1/incidents/{INT64_PAST}",
        f"/api/v1/incidents?offset={INT32_PAST}",
        f"/api/v1/incidents?limit={INT32_PAST}",
        f"/api/v1/procs?limit={INT32_PAST}",
        f"/api/v1/jobs?limit={INT32_PAST}",
        f"/api/v1/timeline?job_id=j-1&limit={INT32_PAST}",
    ],
)
def test_an_id_or_count_past_32_bits_in_the_url_is_refused(api: Api, path: str) -> None:
    response = api.http.get(path)
    assert response.status_code in (404, 422), (response.status_code, response.text)
    assert response.json()["error"]["message"]


@pytest.mark.parametrize("action", ["decide", "diagnose"])
def test_pressing_on_an_incident_past_32_bits_is_refused(api: Api, action: str) -> None:
    body = {"action": "dismiss"} if action == "decide" else None
    response = api.http.post(f"/api/v1/incidents/{INT32_PAST}/{action}", json=body)
    assert refused_on(response, "incident_id"), response.text
    assert "2147483647" in response.json()["error"]["message"]


@pytest.mark.parametrize("pid", [INT32_PAST, INT64_PAST, -1])
def test_a_runner_pid_out_of_range_is_refused(api: Api, pid: int) -> None:
    response = api.http.post("/api/v1/runners", json={"fleet": "cpu", "host": "h", "pid": pid})
    assert refused_on(response, "pid"), response.text


@pytest.mark.parametrize("exit_code", [INT32_PAST, -(2**31) - 1, INT64_PAST, -INT64_PAST])
@pytest.mark.parametrize("move", ["complete", "fail"])
def test_an_exit_code_out_of_range_is_refused(api: Api, move: str, exit_code: int) -> None:
    api.lease_again()
    body: dict[str, Any] = {"lease_token": api.lease_token, "exit_code": exit_code}
    if move == "fail":
        body["reason"] = "r"
    response = api.http.post(f"/api/v1/tasks/{api.task_id}/{move}", json=body)
    assert refused_on(response, "exit_code"), response.text
    # The lease is still live: nothing was recorded.
    assert api.http.get(f"/api/v1/tasks/{api.task_id}").json()["status"] == "running"


def test_the_widest_exit_code_a_column_holds_is_kept(api: Api) -> None:
    api.lease_again()
    body = {"lease_token": api.lease_token, "exit_code": -(2**31)}
    response = api.http.post(f"/api/v1/tasks/{api.task_id}/complete", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["exit_code"] == -(2**31)


@pytest.mark.parametrize("tokens", [INT32_PAST, 10**12])
def test_a_token_count_past_its_column_is_refused(api: Api, tokens: int) -> None:
    event = {"phase": "tool", "input_tokens": tokens}
    response = api.http.post("/api/v1/events/batch", json={"events": [event]})
    assert refused_on(response, "input_tokens"), response.text


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("title", b'{"kind": "crawl", "run_id": "s1", "title": "bad \\ud800 title"}'),
        ("payload", b'{"title": "t", "org": "o", "fleet": "f", "payload": {"x": "\\ud800"}}'),
    ],
)
def test_a_lone_surrogate_is_refused(api: Api, field: str, raw: bytes) -> None:
    # Valid JSON, but no UTF-8 encoding exists for it: stored, it could not be answered back.
    path = "/api/v1/runs" if field == "title" else "/api/v1/jobs"
    response = api.http.post(path, content=raw, headers={"content-type": "application/json"})
    assert refused_on(response, field), response.text


def test_nan_in_a_payload_is_refused(api: Api) -> None:
    raw = b'{"title": "t", "org": "o", "fleet": "cpu", "payload": {"argv": ["true"], "x": NaN}}'
    response = api.http.post(
        "/api/v1/jobs", content=raw, headers={"content-type": "application/json"}
    )
    assert refused_on(response, "payload"), response.text


def test_the_store_refuses_what_slips_past_the_api_with_a_4xx_error(api: Api) -> None:
    queue = QueueStore(api.server.runtime.store.engine)
    runner = NewRunner("cpu", 1, "h", INT64_PAST, None, None)
    with pytest.raises(errors.WatchkeeperError) as refused:
        queue.register(runner, utcnow())
    assert type(refused.value).__name__ == "ValueRefused"
    assert isinstance(refused.value, errors.InvalidInput)  # answered 422, not 500
    assert "registering a runner" in str(refused.value)


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00Z"])
@pytest.mark.parametrize(
    ("field", "path", "body"),
    [
        ("at", "/api/v1/runs/crawl/known/progress", lambda at: {"at": at}),
        (
            "started_at",
            "/api/v1/runs",
            lambda at: {"kind": "crawl", "title": "t", "started_at": at},
        ),
        ("at", "/api/v1/events/batch", lambda at: {"events": [{"phase": "tool", "at": at}]}),
    ],
)
def test_a_time_the_store_could_not_give_back_is_refused(
    api: Api, field: str, path: str, body: Callable[[str], Any], at: str
) -> None:
    response = api.http.post(path, json=body(at))
    assert refused_on(response, field), response.text
    assert "1970-01-01T00:00:00Z" in response.json()["error"]["message"]
    # Nothing was stored that would make the run unreadable.
    assert api.http.get("/api/v1/runs/crawl/known").status_code == 200


def test_a_hook_url_no_client_can_send_to_is_refused(api: Api) -> None:
    # It starts like a URL, but no HTTP client can send to its host: refused up front,
    # instead of failing the hook (or, before, the reaping) once the run ends.
    response = api.http.post(
        "/api/v1/procs", json={"argv": ["true"], "on_done_url": "http://\\ª/done"}
    )
    assert refused_on(response, "on_done_url"), response.text
