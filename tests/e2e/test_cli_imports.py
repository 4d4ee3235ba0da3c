"""`watchkeeper runs` asks the server before it loads anything the server side needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from watchkeeper.cli import COMMANDS

from ..support.cli import cli_env

#: The real command line, then the top-level packages it had loaded, as JSON on stdout.
PROBE = textwrap.dedent(
    """
    import json, sys
    from watchkeeper.cli import main

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
        capture_output=True, text=True, timeout=60, env=cli_env(bare), cwd=tmp_path, check=False,
    )  # fmt: skip
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert SERVER_SIDE.isdisjoint(result["modules"]), SERVER_SIDE & set(result["modules"])
    assert "watchkeeper" in result["modules"]


#: As the installed `watchkeeper` script starts: through the entry point, not the CLI module.
ENTRY_PROBE = PROBE.replace(
    "from watchkeeper.cli import main", "from watchkeeper.entry import main"
)


def test_the_command_skips_httpxs_own_command_line_client(tmp_path: Path) -> None:
    # `import httpx` would load httpx's CLI (Rich progress bars, Pygments lexers) for nothing.
    bare = {name: "" for name in os.environ if name.startswith("WATCHKEEPER_")}
    probe = subprocess.run(
        [sys.executable, "-c", ENTRY_PROBE, "runs"],
        capture_output=True, text=True, timeout=60, env=cli_env(bare), cwd=tmp_path, check=False,
    )  # fmt: skip
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert "httpx" in result["modules"]  # it did ask the server
    assert "pygments" not in result["modules"]


#: What the commands that only ask a server, or only print, must not load: the server side,
#: the configuration's and Typer's validation (pydantic), and the event loop.
HEAVY = SERVER_SIDE | {"pydantic", "pydantic_core", "asyncio"}


#: The entry point's probe, naming every module it had loaded, not only the top-level ones.
FULL_PROBE = ENTRY_PROBE.replace('{m.split(".")[0] for m in sys.modules}', "sys.modules")


def _entry_modules(tmp_path: Path, *argv: str) -> set[str]:
    """Every module the installed command had loaded when ``argv`` ended."""
    bare = {name: "" for name in os.environ if name.startswith("WATCHKEEPER_")}
    probe = subprocess.run(
        [sys.executable, "-c", FULL_PROBE, *argv],
        capture_output=True, text=True, timeout=60, env=cli_env(bare), cwd=tmp_path, check=False,
    )  # fmt: skip
    assert probe.stdout.strip(), probe.stderr
    return set(json.loads(probe.stdout.strip().splitlines()[-1])["modules"])


def _packages(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


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
    loaded = _packages(modules)
    assert "watchkeeper" in loaded
    assert HEAVY.isdisjoint(loaded), sorted(HEAVY & loaded)
    # At most the module of the command named: not every command's module and what it imports.
    every = {f"watchkeeper.cli.{module}" for _, module, *_ in COMMANDS}
    assert len(every & modules) <= 1, sorted(every & modules)


def test_status_loads_no_web_server(tmp_path: Path) -> None:
    # `status` reads this host's store, so it needs the configuration and the database layer,
    # but never the web framework or the migrations.
    (tmp_path / "watchkeeper.toml").write_text('data_dir = "data"\n')
    config = str(tmp_path / "watchkeeper.toml")
    loaded = _packages(_entry_modules(tmp_path, "--config", config, "status", "p-1"))
    web = {"fastapi", "uvicorn", "starlette", "alembic"}
    assert web.isdisjoint(loaded), sorted(web & loaded)
