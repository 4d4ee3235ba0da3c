"""The docs' code examples work as written: TOML through the config parser, Python and
shell against a live server on loopback. See tests/docs/examples.py for the markers."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from watchkeeper import config
from watchkeeper.runtime import Runtime

from ..support.live_server import LiveServer, live_server
from .examples import ROOT, Example, all_examples

EXAMPLES = all_examples()
RUNNABLE = [e for e in EXAMPLES if e.skip is None]
#: Tables the SQL kind examples read, so their queries run on SQLite as written.
SQL_SCHEMAS = {
    "crawls": "CREATE TABLE crawls (id TEXT, name TEXT, state TEXT, updated_at TEXT, "
    "created_at TEXT, worker_alive INTEGER, last_error TEXT)",
}


def _name(example: Example) -> str:
    return example.name


def test_the_examples_are_found_and_every_skip_says_why() -> None:
    skipped = [e for e in EXAMPLES if e.skip]
    assert len(RUNNABLE) >= 15, "the docs' runnable examples went missing"
    assert all(len(e.skip or "") > 10 for e in skipped)
    print(f"{len(RUNNABLE)} examples run, {len(skipped)} skipped with a reason")


@pytest.mark.parametrize("example", [e for e in RUNNABLE if e.language == "toml"], ids=_name)
def test_toml_example_is_a_valid_configuration(example: Example) -> None:
    raw = tomllib.loads(example.code)
    settings = config.parse(raw, example.name)
    # config.parse raises on a bad example; every kind the example names must come through.
    assert set(raw.get("kinds", {})) <= set(settings.kinds), example.name
    for name, kind in settings.kinds.items():
        if kind.adapter == "sql" and str(kind.options.get("url", "")).startswith("sqlite"):
            _run_on_sqlite(f"{example.name} kinds.{name}", str(kind.options["query"]))


def _run_on_sqlite(where: str, query: str) -> None:
    """The query as SQLite runs it, on empty tables of the shape the example reads."""
    with sqlite3.connect(":memory:") as conn:
        for table in set(re.findall(r"\bFROM\s+(\w+)", query, re.IGNORECASE)):
            assert table in SQL_SCHEMAS, f"{where}: add the schema of {table} to SQL_SCHEMAS"
            conn.execute(SQL_SCHEMAS[table])
        try:
            conn.execute(query).fetchall()
        except sqlite3.Error as exc:
            pytest.fail(f"{where}: SQLite refuses the query: {exc}")


@pytest.fixture
def server(runtime: Runtime) -> LiveServer:
    with live_server(runtime) as live:
        yield live


def _run(
    example: Example, server: LiveServer, tmp_path: Path, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``example`` (or ``code`` in its place) as a reader would, against ``server``."""
    token = server.tokens["admin"]
    script = tmp_path / ("example.py" if example.language == "python" else "example.sh")
    script.write_text(code or example.for_server(server.url, token), encoding="utf-8")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "WATCHKEEPER_URL": server.url,
        # Only the documented variable: an example reading one it never set must fail.
        "WATCHKEEPER_TOKEN": token,
    }
    # A shell example stops at its first failing command, as a reader would notice it.
    argv = (
        [sys.executable, str(script)]
        if example.language == "python"
        else ["bash", "-e", str(script)]
    )
    # Its own session, so whatever the example leaves running is ended with it.
    process = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _example(page: str, containing: str) -> Example:
    (found,) = [e for e in RUNNABLE if e.page == page and containing in e.code]
    return found


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("example", [e for e in RUNNABLE if e.language != "toml"], ids=_name)
def test_example_runs_against_a_live_server(
    example: Example, server: LiveServer, tmp_path: Path
) -> None:
    done = _run(example, server, tmp_path)
    assert done.returncode == 0, (
        f"{example.name} failed as written (exit {done.returncode}):\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_supervision_example_reports_its_child(server: LiveServer, tmp_path: Path) -> None:
    done = _run(_example("docs/supervise.md", "ChildReporter("), server, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "failed 0" in done.stdout
    with server.client() as client:
        run = client.get("/api/v1/runs/child/app:indexer").json()
    assert run["status"] == "succeeded"


def _titled(tree: object, title: str) -> list[dict[str, object]]:
    if isinstance(tree, dict):
        own = [tree] if tree.get("title") == title and "run_id" in tree else []
        return own + [r for value in tree.values() for r in _titled(value, title)]
    if isinstance(tree, list):
        return [r for value in tree for r in _titled(value, title)]
    return []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_shell_script_reports_a_failure_inside_a_function(
    server: LiveServer, tmp_path: Path
) -> None:
    example = _example("docs/cli.md", "trap ")
    working = 'fetch_page() { echo "fetched page $1"; }'
    assert working in example.code
    failing = example.for_server(server.url, server.tokens["admin"]).replace(
        working, 'fetch_page() { test "$1" -lt 3; }'
    )
    done = _run(example, server, tmp_path, failing)
    assert done.returncode != 0
    with server.client() as client:
        (listed,) = _titled(
            client.get("/api/v1/runs", params={"all": True}).json(), "nightly crawl"
        )
        run = client.get(f"/api/v1/runs/crawl/{listed['run_id']}").json()
    assert run["status"] == "failed", done.stderr
    assert run["step"] == "page 2"
