"""Open incidents of a kind that became unreadable stay in "Needs attention", marked as last seen.

The kind is another system's SQLite file; it becomes unreadable for real (the
file is moved away). Its open incident must still be listed by the API, the
dashboard and ``/runs`` in chat, with when the work was last seen.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from tests.support.waiting import TIMEOUT_S
from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import T0, make_settings
from ..support.live_server import LiveServer, live_server
from ..support.web_login import log_in
from .fakes.discord import fake_discord
from .fakes.platform import FakePlatform
from .fakes.slack import fake_slack
from .helpers import sweep
from .notify.chat import now_s, table, user

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": fake_discord,
    "slack": fake_slack,
}
QUERY = (
    "SELECT id AS run_id, name AS title, state AS status, updated AS progress_at, "
    "updated AS started_at FROM crawls"
)
#: The crawl was last read (and seen stalled) at this time, two minutes after it last moved.
LAST_SEEN = T0 + timedelta(seconds=120)


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    with FAKES[request.param]() as started:
        yield started


@pytest.fixture
def crawler_db(tmp_path: Path) -> Path:
    path = tmp_path / "crawler.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE crawls (id TEXT, name TEXT, state TEXT, updated REAL)")
        conn.execute(
            "INSERT INTO crawls VALUES ('c1', 'Nightly crawl', 'running', ?)", (T0.timestamp(),)
        )
    return path


@pytest.fixture
def watching(
    tmp_path: Path, store: Store, clock: ManualClock, crawler_db: Path, fake: FakePlatform
) -> Iterator[Runtime]:
    kinds = {
        "crawler": {
            "adapter": "sql",
            "url": f"sqlite:///{crawler_db}",
            "query": QUERY,
            "budget_s": 60,
        }
    }
    settings = make_settings(tmp_path, store.url, kinds=kinds, **{fake.NAME: table(fake)})
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    yield runtime
    runtime.sweeper.close()


def unreadable_after_a_stall(runtime: Runtime, clock: ManualClock, crawler_db: Path) -> int:
    """The crawl stalls and is seen so; then its database goes away. The incident's id."""
    clock.advance(61)
    assert len(sweep(runtime).applied.opened) == 1
    clock.advance(59)
    assert sweep(runtime).ok  # seen once more, still stalled, at LAST_SEEN
    crawler_db.rename(crawler_db.with_name("moved.db"))
    runtime.sweeper.adapters["crawler"].close()  # pooled connections keep the moved file open
    clock.advance(300)
    result = sweep(runtime)
    assert not next(r for r in result.reads if r.kind == "crawler").readable
    (incident,) = runtime.store.incidents.list("live")
    return incident.id


def dashboard_work(server: LiveServer) -> str:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_S) as web:
        log_in(web, server.tokens["viewer"])
        return web.get("/web/fragments/work").text


def test_the_open_incident_of_an_unreadable_kind_still_needs_attention(
    watching: Runtime, clock: ManualClock, crawler_db: Path, fake: FakePlatform
) -> None:
    incident_id = unreadable_after_a_stall(watching, clock, crawler_db)
    with live_server(watching) as server:
        with server.client("viewer") as api:
            listed = api.get("/api/v1/runs").json()
        chat = fake.runs_text(fake.runs(server.url, user(fake, "bob"), "bob", False, now_s(clock)))
        page = dashboard_work(server)
    unreadable = {u["kind"]: u["error"] for u in listed["unreadable"]}
    assert list(unreadable) == ["crawler"], unreadable
    (item,) = listed["attention"]
    assert (item["kind"], item["run_id"], item["incident_id"]) == ("crawler", "c1", incident_id)
    assert item["verdict"]["condition"] == "stalled"
    assert item["last_seen"] == {
        "at": "2026-01-05T12:02:00Z",
        "text": "last seen 2026-01-05 12:02 UTC, before crawler became unreadable",
    }
    assert listed["counts"]["attention"] == 1
    assert "Needs attention (1)" in chat
    assert "Nightly crawl (crawler c1) stalled" in chat
    assert "last seen 2026-01-05 12:02 UTC, before crawler became unreadable" in chat
    attention = page.split("<h2>Running")[0]
    assert 'data-run="crawler/c1"' in attention
    assert "last seen 2026-01-05 12:02 UTC, before crawler became unreadable" in attention
