"""``report progress`` with counters and a step's times takes the fast path, sends what the
full command line sends, and leaves every value it cannot read exactly to the full one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.runtime import Runtime

from ..support.cli_probe import both_ways, packages, probe
from ..support.live_server import LiveServer, live_server

#: What a report from a shell script must not load (as in test_cli_imports.py).
FRAMEWORK = {"typer", "click", "rich", "pydantic", "pydantic_core", "sqlalchemy"}

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        with live.client("reporter") as http:
            body = {"kind": "crawl", "title": "t", "run_id": "r-count"}
            assert http.post("/api/v1/runs", json=body).status_code in {200, 201}
        yield live


def _run(server: LiveServer) -> dict[str, Any]:
    with server.client("viewer") as http:
        shown: dict[str, Any] = http.get("/api/v1/runs/crawl/r-count").json()
        return shown


def _reporter(server: LiveServer) -> dict[str, str]:
    return {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}


def test_counters_and_step_times_go_the_fast_way(tmp_path: Path, server: LiveServer) -> None:
    argv = (
        "report",
        "progress",
        "crawl",
        "r-count",
        "-s",
        "tests",
        "--done",
        "12",
        "--total=40",
        "--budget",
        "30m",
        "--expected",
        "2h30m",
    )
    result = probe(tmp_path, _reporter(server), *argv)
    assert result["status"] == 0
    assert FRAMEWORK.isdisjoint(packages(set(result["modules"])))
    run = _run(server)
    assert (run["step"], run["done"], run["total"]) == ("tests", 12, 40)
    assert (run["step_budget_s"], run["step_expected_s"]) == (1800, 9000)


def test_either_way_sends_the_same_and_says_the_same(tmp_path: Path, server: LiveServer) -> None:
    env = _reporter(server)
    sent = ("report", "progress", "crawl", "r-count", "--done", "007", "--budget", "90")
    fast, full = both_ways(tmp_path, env, *sent)
    said = (fast.returncode, fast.stdout, fast.stderr)
    assert said == (full.returncode, full.stdout, full.stderr)
    run = _run(server)
    # The full command line sent the second, identical report: the same values, repeated.
    assert (run["done"], run["step_budget_s"], run["repeats"]) == (7, 90, 2)
    # A sign the fast path does not read: the full command line reads and sends it.
    fast, full = both_ways(tmp_path, env, "report", "progress", "crawl", "r-count", "--done", "+3")
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr) == (0, "")
    assert (_run(server)["done"], _run(server)["repeats"]) == (3, 2)
    refused = [
        ("--budget", "soon"),
        ("--budget", "0"),
        ("--expected", "-5m"),
        ("--expected=inf",),
        ("--done", "-1"),
        ("--done", "1.5"),
        ("--done", "٣"),  # a digit, but not one the full command line reads as a number
        ("--total", "many"),
        ("--total", str(2**60)),  # read by both, refused by the server
        ("--budget",),
    ]
    run_before = _run(server)
    for extra in refused:
        argv = ("report", "progress", "crawl", "r-count", *extra)
        fast, full = both_ways(tmp_path, env, *argv)
        said = (fast.returncode, fast.stdout, fast.stderr)
        assert said == (full.returncode, full.stdout, full.stderr), extra
        assert fast.returncode != 0, extra
        assert "Traceback" not in fast.stderr, extra
    assert _run(server)["reported_at"] == run_before["reported_at"]  # none was recorded
