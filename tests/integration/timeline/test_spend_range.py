"""Spend over a date range: the API and the SDK count only the calls made within it, on
SQLite and PostgreSQL; a date means that whole (UTC) day, a time that instant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime

import httpx
import pytest

from tests.support.live_server import LiveServer, live_server
from watchkeeper.client import Client
from watchkeeper.runtime import Runtime

# One call before the range, two inside (one just before midnight, one just after), one after.
CALLS = {
    "2026-01-03T10:00:00Z": 1_000,
    "2026-01-05T23:30:00Z": 2_000,
    "2026-01-06T00:30:00Z": 4_000,
    "2026-01-08T12:00:00Z": 8_000,
}


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        with Client(live.url, live.tokens["reporter"]) as reporter:
            reporter.timeline.emit_batch(
                [
                    {
                        "phase": "implementer",
                        "at": at,
                        "task_id": "t-range",
                        "role": "implementer",
                        "model": "claude-haiku-4-5",
                        "provider": "anthropic",
                        "input_tokens": tokens,
                    }
                    for at, tokens in CALLS.items()
                ]
            )
        yield live


def _spend(server: LiveServer, **params: str) -> httpx.Response:
    with server.client("viewer") as http:
        return http.get("/api/v1/spend", params={"by": "day", **params})


def _tokens(body: dict[str, object]) -> int:
    totals = body["totals"]
    assert isinstance(totals, dict)
    return int(totals["input_tokens"])


def test_the_api_counts_the_calls_within_a_range_of_days_or_times(server: LiveServer) -> None:
    everything = _spend(server).json()
    assert _tokens(everything) == 15_000 and everything["totals"]["calls"] == 4

    # Dates: from the start of the first day to the end of the last, both included.
    days = _spend(server, since="2026-01-05", until="2026-01-06")
    assert days.status_code == 200, days.text
    assert _tokens(days.json()) == 6_000
    assert sorted(g["key"] for g in days.json()["groups"]) == ["2026-01-05", "2026-01-06"]

    # Times: from that instant (included) to that instant (left out), in any offset.
    times = _spend(server, since="2026-01-05T23:00:00Z", until="2026-01-06T00:30:00Z").json()
    assert _tokens(times) == 2_000
    offset = _spend(server, since="2026-01-06T01:00:00+01:00", until="2026-01-06T02:00:00+01:00")
    assert _tokens(offset.json()) == 4_000
    assert _tokens(_spend(server, since="2026-01-06").json()) == 12_000
    assert _tokens(_spend(server, until="2026-01-05").json()) == 3_000
    assert _spend(server, since="2026-02-01").json()["totals"]["calls"] == 0


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"since": "yesterday"}, "since 'yesterday' is not a date or a time"),
        ({"until": "2026-13-01"}, "until '2026-13-01' is not a date or a time"),
        ({"since": "2026-01-06", "until": "2026-01-05"}, "until must be later than since"),
    ],
)
def test_a_range_that_cannot_be_read_is_refused_saying_how_to_write_it(
    server: LiveServer, params: dict[str, str], said: str
) -> None:
    answer = _spend(server, **params)
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert said in message
    if "not a date" in said:
        assert "2026-01-05" in message and "2026-01-05T12:00:00Z" in message


def test_the_sdk_takes_dates_times_and_text_for_the_range(server: LiveServer) -> None:
    with Client(server.url, server.tokens["viewer"]) as viewer:
        days = viewer.timeline.spend("day", since=date(2026, 1, 5), until=date(2026, 1, 6))
        assert _tokens(days) == 6_000
        times = viewer.timeline.spend(
            "model",
            since=datetime(2026, 1, 5, 23, tzinfo=UTC),
            until=datetime(2026, 1, 6, 0, 30, tzinfo=UTC),
        )
        assert _tokens(times) == 2_000
        assert _tokens(viewer.timeline.spend("role", since="2026-01-06")) == 12_000


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_command_line_reads_the_same_range(server: LiveServer) -> None:
    from tests.support.cli import wk

    where = ("--server", server.url, "--token", server.tokens["viewer"])
    done = wk(
        "spend", "--by", "day", "--since", "2026-01-05", "--until", "2026-01-06", "--json", *where
    )
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["totals"]["calls"] == 2
    assert body["totals"]["input_tokens"] == 6_000
    refused = wk("spend", "--since", "last tuesday", *where)
    assert refused.returncode != 0
    assert "since" in refused.stderr and "Traceback" not in refused.stderr
