"""``watchkeeper runs`` starts fast: no Typer, no validation library, no httpx.

It is what people type most, and its answer is one GET. The entry point reads the forms
``runs`` takes, asks the server over the standard library's HTTP client and prints the
same tables (Rich) as the full command line. These tests hold it to saying and exiting
exactly as the full command line does, and to leaving every other form to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.runtime import Runtime

from ..support.cli_probe import both_ways, packages, probe
from ..support.live_server import LiveServer, live_server

#: What `runs` must not load on its way: the command-line framework, validation, the HTTP
#: library of the SDK (a third of the start-up), the database layer.
NOT_NEEDED = {"typer", "click", "pydantic", "pydantic_core", "httpx", "httpcore", "sqlalchemy"}

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        with live.client("reporter") as http:
            for run_id, title in (("r-one", "first crawl"), ("r-two", "second crawl")):
                body = {"kind": "crawl", "title": title, "run_id": run_id}
                answer = http.post("/api/v1/runs", json=body)
                assert answer.status_code in {200, 201}, answer.text
            http.post("/api/v1/runs/crawl/r-two/finish", json={})
        yield live


def _ages_blurred(text: str) -> str:
    # The two commands run a moment apart; a run's age may tick between them.
    return re.sub(r"\b\d+[smh] ago\b", "N ago", text)


def _viewer(server: LiveServer) -> dict[str, str]:
    return {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["viewer"]}


def test_runs_loads_no_cli_framework_nor_http_library(tmp_path: Path, server: LiveServer) -> None:
    for argv in (("runs",), ("runs", "--all"), ("runs", "--json", "-a")):
        result = probe(tmp_path, _viewer(server), *argv)
        assert result["status"] == 0, argv
        loaded = packages(result["modules"])
        assert NOT_NEEDED.isdisjoint(loaded), (argv, sorted(NOT_NEEDED & loaded))
        assert "watchkeeper.cli.app" not in result["modules"], argv


def test_runs_says_and_exits_the_same_either_way(tmp_path: Path, server: LiveServer) -> None:
    viewer = _viewer(server)
    token_only = {"WATCHKEEPER_TOKEN": server.tokens["viewer"]}
    cases: list[tuple[dict[str, str], tuple[str, ...]]] = [
        (viewer, ("runs",)),
        (viewer, ("runs", "--all")),
        (viewer, ("runs", "-a", "--json")),
        (viewer, ("runs", "--json")),
        (token_only, ("runs", "--server", server.url + "/")),
        (token_only, ("runs", f"--server={server.url}", "-a")),
        ({"WATCHKEEPER_URL": server.url}, ("runs", "--token", server.tokens["viewer"])),
        ({**viewer, "WATCHKEEPER_TOKEN": "wk_not_a_token"}, ("runs",)),
        ({**viewer, "WATCHKEEPER_TOKEN": ""}, ("runs",)),
        ({"WATCHKEEPER_URL": "http://127.0.0.1:9"}, ("runs",)),
        ({}, ("runs", "--server", "http://127.0.0.1:9/")),
        (viewer, ("runs", "--bogus")),
        (viewer, ("runs", "extra")),
        (viewer, ("runs", "--all=yes")),
        (viewer, ("runs", "--server")),
        (viewer, ("runs", "--help")),
        (viewer, ("runs", "--store", str(tmp_path / "no-store-here"))),
        (viewer, ("-c", str(tmp_path / "absent.toml"), "runs")),
    ]
    for env, argv in cases:
        fast, full = both_ways(tmp_path, env, *argv)
        said = (fast.returncode, _ages_blurred(fast.stdout), fast.stderr)
        assert said == (full.returncode, _ages_blurred(full.stdout), full.stderr), argv
    shown, _ = both_ways(tmp_path, viewer, "runs", "--all")
    assert shown.returncode == 0
    assert "first crawl" in shown.stdout and "second crawl" in shown.stdout
    assert "Finished in the last day (1)" in shown.stdout
    refused, _ = both_ways(tmp_path, {**viewer, "WATCHKEEPER_TOKEN": "wk_not_a_token"}, "runs")
    assert refused.returncode == 1 and "error:" in refused.stderr
    unreachable, _ = both_ways(tmp_path, {"WATCHKEEPER_URL": "http://127.0.0.1:9"}, "runs")
    assert "cannot reach watchkeeper at http://127.0.0.1:9 (from WATCHKEEPER_URL)" in (
        unreachable.stderr
    )


def test_a_proxy_in_the_environment_is_used_as_the_sdk_uses_it(
    tmp_path: Path, server: LiveServer
) -> None:
    # The SDK's HTTP library sends through HTTP_PROXY; nothing listens at this one, so a
    # command that honours it cannot reach the server, and one that ignores it would answer.
    for argv in (("runs",), ("report", "heartbeat", "crawl", "r-one")):
        env = {
            **_viewer(server),
            "WATCHKEEPER_TOKEN": server.tokens["reporter"],
            "HTTP_PROXY": "http://127.0.0.1:9",
        }
        fast, full = both_ways(tmp_path, env, *argv)
        assert (fast.returncode, fast.stdout, fast.stderr) == (
            full.returncode,
            full.stdout,
            full.stderr,
        ), argv
        assert fast.returncode == 1, argv
