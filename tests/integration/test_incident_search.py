"""All incidents as a list: search, filters (kind, condition, state, decided by, opened
between two times), pages with a total, and exports as CSV and JSON with the same filters."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import T0, make_settings
from tests.support.incidents import decide, open_incidents
from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.clock import ManualClock, rfc3339
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Changes

#: (kind, run id, condition, title, hours after T0 it opened)
MADE = [
    ("crawl", "r-1", "stalled", "crawl of example.org", 0),
    ("crawl", "r-2", "failed", "crawl of docs.example.org", 1),
    ("chat_turn", "t-1", "stuck", "turn in #support", 2),
    ("chat_turn", "t-2", "stalled", "turn in #billing", 3),
    ("job", "j-1", "failed", '=HYPERLINK("http://evil.example")', 4),
]


@pytest.fixture
def server(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[LiveServer]:
    by_run = open_incidents(store, MADE, T0)
    decide(store, by_run["r-2"], "crawl", "r-2", T0 + timedelta(hours=5))
    store.incidents.apply(Changes(resolutions=[(by_run["t-1"], "it moved")]), T0)
    settings = make_settings(tmp_path, store.url)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as live:
        yield live
    runtime.sweeper.close()


def _runs(server: LiveServer, **query: str) -> tuple[list[str], int]:
    with server.client("viewer") as http:
        answer = http.get("/api/v1/incidents", params=query)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return [i["run_id"] for i in body["incidents"]], body["total"]


def test_filters_narrow_the_list_and_the_total_counts_every_page(server: LiveServer) -> None:
    assert _runs(server) == (["j-1", "t-2", "t-1", "r-2", "r-1"], 5)
    assert _runs(server, kind="crawl") == (["r-2", "r-1"], 2)
    assert _runs(server, condition="stalled") == (["t-2", "r-1"], 2)
    assert _runs(server, status="resolved") == (["t-1"], 1)
    assert _runs(server, decided_by="@ana") == (["r-2"], 1)
    assert _runs(server, decided_by="nobody")[1] == 4
    assert _runs(server, q="EXAMPLE.ORG") == (["r-2", "r-1"], 2)  # any case, title or run id
    assert _runs(server, q="j-1") == (["j-1"], 1)
    since, until = rfc3339(T0 + timedelta(hours=1)), rfc3339(T0 + timedelta(hours=3))
    assert _runs(server, since=since or "", until=until or "") == (["t-1", "r-2"], 2)
    assert _runs(server, kind="crawl", condition="failed", decided_by="@ana") == (["r-2"], 1)
    assert _runs(server, limit="2") == (["j-1", "t-2"], 5)
    assert _runs(server, limit="2", offset="4") == (["r-1"], 5)


def test_exports_carry_the_same_filters(server: LiveServer) -> None:
    with server.client("viewer") as http:
        as_csv = http.get("/api/v1/incidents/export", params={"format": "csv", "kind": "crawl"})
        as_json = http.get("/api/v1/incidents/export", params={"kind": "crawl"})
    assert as_csv.status_code == 200, as_csv.text
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert "attachment" in as_csv.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [r["run_id"] for r in rows] == ["r-2", "r-1"]
    # A cell a spreadsheet would run as a formula (Excel reads "@..." as one too) is text.
    assert rows[0]["decided_by"] == "'@ana" and rows[0]["decided_action"] == "retry"
    assert rows[0]["title"] == "crawl of docs.example.org"
    assert as_json.status_code == 200
    assert [i["run_id"] for i in as_json.json()["incidents"]] == ["r-2", "r-1"]
    assert "attachment" in as_json.headers["content-disposition"]
    with server.client("viewer") as http:
        job = http.get("/api/v1/incidents/export", params={"format": "csv", "kind": "job"})
    (row,) = csv.DictReader(io.StringIO(job.text))
    assert row["title"] == '\'=HYPERLINK("http://evil.example")'


def test_the_sdk_searches_and_exports(server: LiveServer) -> None:
    with Client(server.url, server.tokens["viewer"]) as client:
        page = client.incidents.search(kind="chat_turn", limit=1)
        exported = client.incidents.export("csv", condition="failed")
        as_json = client.incidents.export("json", q="example.org")
    assert ([i["run_id"] for i in page["incidents"]], page["total"]) == (["t-2"], 2)
    assert [row["run_id"] for row in csv.DictReader(io.StringIO(exported))] == ["j-1", "r-2"]
    assert as_json["total"] == 2 and not as_json["truncated"]


def test_bad_filters_are_explained(server: LiveServer) -> None:
    with server.client("viewer") as http:
        bad_time = http.get("/api/v1/incidents", params={"since": "yesterday"})
        bad_state = http.get("/api/v1/incidents", params={"status": "sleeping"})
        bad_format = http.get("/api/v1/incidents/export", params={"format": "xlsx"})
        later, earlier = "2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z"
        backwards = http.get("/api/v1/incidents", params={"since": later, "until": earlier})
    for answer in (bad_time, bad_state, bad_format, backwards):
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["message"]
    assert "since" in bad_time.json()["error"]["message"]
    assert "until" in backwards.json()["error"]["message"]
