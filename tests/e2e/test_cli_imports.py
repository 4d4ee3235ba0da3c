"""`watchkeeper runs` asks the server before it loads anything the server side needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.cli.app import COMMANDS
from watchkeeper.runtime import Runtime

from ..support.cli import WK, cli_env
from ..support.cli_probe import both_ways, packages, probe
from ..support.live_server import LiveServer, live_server

#: The real command line, then the top-level packages it had loaded, as JSON on stdout.
PROBE = textwrap.dedent(
    """
    import json, sys
    from watchkeeper.cli.app import main

    status = main(sys.argv[1:]) if "cli" in main.__module__ else main()
    print(json.dumps({"status": status, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
    """
)

#: What only `serve`, `db` or a local store need. (Typer itself loads pydantic.)
SERVER_SIDE = {"sqlalchemy", "alembic", "fastapi", "uvicorn", "starlette", "psycopg"}


def test_runs_loads_nothing_of_the_server_side(tmp_path: Path) -> None:
    # As a user types it: no flags, no WATCHKEEPER_* settings, whatever answers or not.
    bare = {name: "" for name in os.environ if name.startswith("WATCHKEEPER_")}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, "runs"],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(bare),
        cwd=tmp_path,
        check=False,
    )
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert SERVER_SIDE.isdisjoint(result["modules"]), SERVER_SIDE & set(result["modules"])
    assert "watchkeeper" in result["modules"]


def test_the_command_skips_httpxs_own_command_line_client(tmp_path: Path) -> None:
    # `import httpx` would load httpx's CLI (Rich progress bars, Pygments lexers) for nothing.
    loaded = packages(
        probe(tmp_path, {}, "status", "p-1", "--server", "http://127.0.0.1:9")["modules"]
    )
    assert "httpx" in loaded  # it did ask the server, through the SDK
    assert "pygments" not in loaded


#: What the commands that only ask a server, or only print, must not load: the server side,
#: the configuration's and Typer's validation (pydantic), and the event loop.
HEAVY = SERVER_SIDE | {"pydantic", "pydantic_core", "asyncio"}


def _entry_modules(tmp_path: Path, *argv: str) -> set[str]:
    """Every module the installed command had loaded when ``argv`` ended."""
    return set(probe(tmp_path, {}, *argv)["modules"])


@pytest.mark.parametrize(
    "argv",
    [
        ("--version",),
        ("runs", "--server", "http://127.0.0.1:9"),
        ("runs", "--json", "--all", "--server", "http://127.0.0.1:9"),
        (
            "report",
            "progress",
            "crawl",
            "r-1",
            "--step",
            "page 3",
            "--server",
            "http://127.0.0.1:9",
        ),
        ("show", "r-1", "--server", "http://127.0.0.1:9"),
        ("status", "p-1", "--server", "http://127.0.0.1:9"),
    ],
    ids=["version", "runs", "runs-json", "report-progress", "show", "status"],
)
def test_commands_that_ask_the_server_load_nothing_heavy(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    modules = _entry_modules(tmp_path, *argv)
    loaded = packages(modules)
    assert "watchkeeper" in loaded
    assert HEAVY.isdisjoint(loaded), sorted(HEAVY & loaded)
    # At most the module of the command named: not every command's module and what it imports.
    every = {f"watchkeeper.cli.app.{module}" for _, module, *_ in COMMANDS}
    assert len(every & modules) <= 1, sorted(every & modules)


def test_status_loads_no_web_server(tmp_path: Path) -> None:
    # `status` reads this host's store, so it needs the configuration and the database layer,
    # but never the web framework or the migrations.
    (tmp_path / "watchkeeper.toml").write_text('data_dir = "data"\n')
    config = str(tmp_path / "watchkeeper.toml")
    loaded = packages(_entry_modules(tmp_path, "--config", config, "status", "p-1"))
    web = {"fastapi", "uvicorn", "starlette", "alembic"}
    assert web.isdisjoint(loaded), sorted(web & loaded)


# The hot commands' fast path -------------------------------------------------------------

#: What a report from a shell script must not load: the CLI framework, its output library,
#: validation, the database layer.
FRAMEWORK = {"typer", "click", "rich", "pydantic", "pydantic_core", "sqlalchemy"}


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def _started(server: LiveServer, run_id: str) -> None:
    with server.client("reporter") as http:
        answer = http.post("/api/v1/runs", json={"kind": "crawl", "title": "t", "run_id": run_id})
        assert answer.status_code in {200, 201}, answer.text


def _step(server: LiveServer, run_id: str) -> Any:
    with server.client("viewer") as http:
        return http.get(f"/api/v1/runs/crawl/{run_id}").json()["step"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("verb", ["progress", "heartbeat"])
def test_a_report_loads_no_cli_framework_nor_database_layer(
    tmp_path: Path, server: LiveServer, verb: str
) -> None:
    _started(server, "r-fast")
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}
    extra = ("--step", "page 3") if verb == "progress" else ()
    result = probe(tmp_path, env, "report", verb, "crawl", "r-fast", *extra)
    assert result["status"] == 0
    loaded = packages(set(result["modules"]))
    assert FRAMEWORK.isdisjoint(loaded), sorted(FRAMEWORK & loaded)
    if verb == "progress":
        assert _step(server, "r-fast") == "page 3"  # it did report


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_fast_report_takes_every_form_the_full_one_does(
    tmp_path: Path, server: LiveServer
) -> None:
    _started(server, "r-forms")
    env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}
    # The URL comes from the environment, so a --config named is never read (by either path).
    forms = {
        "short": ("report", "progress", "crawl", "r-forms", "-s", "short"),
        "equals": ("report", "progress", "--step=equals", "crawl", "r-forms"),
        "between": ("report", "progress", "crawl", "--step", "between", "r-forms"),
        "config": (
            "-c",
            str(tmp_path / "absent.toml"),
            "report",
            "progress",
            "crawl",
            "r-forms",
            "-s",
            "config",
        ),
    }
    for step, argv in forms.items():
        result = probe(tmp_path, env, *argv)
        assert result["status"] == 0, argv
        assert FRAMEWORK.isdisjoint(packages(set(result["modules"]))), argv
        assert _step(server, "r-forms") == step
    by_env = probe(
        tmp_path,
        {**env, "WATCHKEEPER_RUN_ID": "r-forms"},
        "report",
        "progress",
        "crawl",
        "--step",
        "from the environment",
    )
    assert by_env["status"] == 0
    assert FRAMEWORK.isdisjoint(packages(set(by_env["modules"])))
    assert _step(server, "r-forms") == "from the environment"
    token = {"WATCHKEEPER_TOKEN": server.tokens["reporter"]}
    by_option = probe(
        tmp_path,
        token,
        "report",
        "progress",
        "crawl",
        "r-forms",
        "--server",
        server.url,
        "-s",
        "option",
    )
    assert by_option["status"] == 0
    assert _step(server, "r-forms") == "option"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_report_says_and_exits_the_same_either_way(tmp_path: Path, server: LiveServer) -> None:
    _started(server, "r-same")
    ok = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["reporter"]}
    cases: list[tuple[dict[str, str], tuple[str, ...]]] = [
        (ok, ("report", "progress", "crawl", "r-same", "--step", "fine")),
        (ok, ("report", "heartbeat", "crawl", "r-same")),
        ({**ok, "WATCHKEEPER_TOKEN": "wk_not_a_token"}, ("report", "progress", "crawl", "r-same")),
        ({**ok, "WATCHKEEPER_TOKEN": ""}, ("report", "progress", "crawl", "r-same")),
        (ok, ("report", "progress", "crawl", "r-nobody-started")),
        (ok, ("report", "heartbeat", "crawl", "r-nobody-started")),
        ({"WATCHKEEPER_URL": "http://127.0.0.1:9"}, ("report", "progress", "crawl", "r-same")),
        ({}, ("report", "progress", "crawl", "r-same", "--server", "http://127.0.0.1:9/")),
        (ok, ("report", "progress", "crawl")),  # no run id anywhere
        (ok, ("report", "progress", "crawl", "r-same", "--bogus")),
        (ok, ("report", "progress", "crawl", "r-same", "extra")),
        (ok, ("report", "progress", "crawl", "r same")),  # a URL escapes the space
        (ok, ("report", "heartbeat", "crawl", "..")),  # and resolves this
        (ok, ("report", "progress", "--help")),
    ]
    for env, argv in cases:
        fast, full = both_ways(tmp_path, env, *argv)
        said = (fast.returncode, fast.stdout, fast.stderr)
        assert said == (full.returncode, full.stdout, full.stderr), argv
    # The errors above really were errors, told in the full path's words.
    unreachable, _ = both_ways(
        tmp_path, {"WATCHKEEPER_URL": "http://127.0.0.1:9"}, "report", "progress", "crawl", "r-same"
    )
    assert unreachable.returncode == 1
    assert "cannot reach watchkeeper at http://127.0.0.1:9 (from WATCHKEEPER_URL)" in (
        unreachable.stderr
    )
    refused, _ = both_ways(
        tmp_path,
        {**ok, "WATCHKEEPER_TOKEN": "wk_not_a_token"},
        "report",
        "progress",
        "crawl",
        "r-same",
    )
    assert refused.returncode == 1 and "error:" in refused.stderr


def test_run_loads_only_the_store_modules_it_uses(tmp_path: Path) -> None:
    # More than data_dir: the configuration model must read it, so this is the full path
    # (tests/e2e/test_cli_fast_run.py has the fast one, which loads no store at all).
    (tmp_path / "watchkeeper.toml").write_text('data_dir = "data"\ncheck_interval_s = 30\n')
    config = str(tmp_path / "watchkeeper.toml")
    made = subprocess.run(
        [*WK, "--config", config, "run", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(),
        cwd=tmp_path,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    result = probe(tmp_path, {}, "--config", config, "run", "--", "true")
    assert result["status"] == 0
    modules = set(result["modules"])
    unused = {
        f"watchkeeper.store.{name}"
        for name in (
            "incidents",
            "decisions",
            "listen",
            "outbox",
            "tokens",
            "sessions",
            "silences",
            "cluster",
            "pacing",
            "heartbeats",
            "runs",
            "timeline",
            "queue",
            "queueing",
        )
    }
    assert unused.isdisjoint(modules), sorted(unused & modules)
    assert "psycopg" not in packages(modules)  # the embedded store needs no PostgreSQL driver
    assert "sqlalchemy" in packages(modules)  # it was the full path
