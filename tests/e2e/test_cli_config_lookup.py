"""Which configuration file a command reads, and that the user can tell.

Each test runs the installed ``watchkeeper`` entry point as a real subprocess, in a
folder of its own with a HOME of its own and no ``WATCHKEEPER_*`` variables, as a
user would type it there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..support.live_server import free_port

#: The console script the package installs, next to this interpreter.
WATCHKEEPER = str(Path(sys.executable).parent / "watchkeeper")
BANNER = "watchkeeper serving on"


@dataclass
class Folder:
    """A user's working folder with a HOME beside it."""

    path: Path
    home: Path

    def env(self) -> dict[str, str]:
        kept = {k: v for k, v in os.environ.items() if not k.startswith("WATCHKEEPER_")}
        # Wide enough that no line the command prints is wrapped.
        return {**kept, "HOME": str(self.home), "COLUMNS": "400"}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [WATCHKEEPER, *args],
            cwd=self.path,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def serve(self, *args: str) -> Served:
        """``watchkeeper ARGS --port P``, read until its banner, then stopped with SIGINT."""
        port = str(free_port())
        errors = self.path.parent / f"serve-{port}.stderr"
        with errors.open("w") as stderr:
            process = subprocess.Popen(
                [WATCHKEEPER, *args, "--port", port],
                cwd=self.path,
                env=self.env(),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
            assert process.stdout is not None
            lines: list[str] = []
            try:
                for line in process.stdout:
                    lines.append(line.rstrip("\n"))
                    if BANNER in line:
                        break
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)
                lines.extend(line.rstrip("\n") for line in process.stdout)
                process.wait(timeout=60)
                process.stdout.close()
        return Served(lines, errors.read_text(), process.returncode)


@dataclass
class Served:
    stdout: list[str]
    stderr: str
    returncode: int

    @property
    def banner(self) -> str:
        found = [line for line in self.stdout if BANNER in line]
        assert found, "serve printed no banner:\n" + "\n".join(self.stdout) + self.stderr
        return found[0]


@pytest.fixture
def folder(tmp_path: Path) -> Folder:
    here = tmp_path / "work"
    home = tmp_path / "home"
    here.mkdir()
    home.mkdir()
    return Folder(here, home)


def _write_config(folder: Folder, name: str = "watchkeeper.toml", port: int = 9) -> Path:
    """A file whose data folder and server port differ from the defaults, so its use shows."""
    config = folder.path / name
    config.write_text(f'data_dir = "from-file"\n\n[server]\nport = {port}\n', encoding="utf-8")
    return config


def _no_traceback(result: subprocess.CompletedProcess[str] | Served) -> None:
    assert "Traceback" not in result.stderr, result.stderr


# -- a watchkeeper.toml in the working folder -------------------------------------------------


def test_an_unread_watchkeeper_toml_here_is_named_with_how_to_use_it(folder: Folder) -> None:
    _write_config(folder)
    result = folder.run("db", "upgrade")
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    # The documented lookup is --config, then WATCHKEEPER_CONFIG, then the defaults.
    assert (folder.path / ".watchkeeper" / "watchkeeper.db").is_file()
    assert not (folder.path / "from-file").exists()
    said = result.stderr
    assert "./watchkeeper.toml" in said and "not read" in said, said
    assert "watchkeeper --config ./watchkeeper.toml db upgrade" in said, said
    assert "WATCHKEEPER_CONFIG" in said, said


def test_a_command_that_asks_a_server_names_the_unread_file_too(folder: Folder) -> None:
    _write_config(folder)
    result = folder.run("token", "list", "--token", "t")
    _no_traceback(result)
    assert result.returncode != 0
    assert "watchkeeper --config ./watchkeeper.toml token list" in result.stderr, result.stderr


def test_the_notice_is_said_once_per_command(folder: Folder) -> None:
    _write_config(folder)
    # doctor reads the configuration and then looks for the server it names.
    result = folder.run("doctor", "--token", "t")
    _no_traceback(result)
    assert result.stderr.count("not read") == 1, result.stderr
    assert "watchkeeper --config ./watchkeeper.toml doctor" in result.stderr


def test_no_notice_when_a_file_is_named(folder: Folder) -> None:
    config = _write_config(folder)
    other = _write_config(folder, "other.toml")
    by_flag = folder.run("--config", str(other), "db", "upgrade")
    assert by_flag.returncode == 0, by_flag.stderr
    assert "not read" not in by_flag.stderr
    by_env = subprocess.run(
        [WATCHKEEPER, "db", "upgrade"],
        cwd=folder.path,
        env={**folder.env(), "WATCHKEEPER_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert by_env.returncode == 0, by_env.stderr
    assert "not read" not in by_env.stderr


def test_no_notice_when_the_server_is_named(folder: Folder) -> None:
    _write_config(folder)
    result = folder.run("token", "list", "--token", "t", "--server", "http://127.0.0.1:9")
    _no_traceback(result)
    assert "not read" not in result.stderr, result.stderr


# -- the serve banner --------------------------------------------------------------------------


def test_serve_names_the_file_it_read(folder: Folder) -> None:
    config = _write_config(folder, "ours.toml")
    served = folder.serve("--config", str(config), "serve")
    _no_traceback(served)
    assert f"config: {config.resolve()}" in served.banner
    assert "not read" not in served.stderr


def test_serve_says_it_read_no_file_and_names_the_one_here(folder: Folder) -> None:
    _write_config(folder)
    served = folder.serve("serve")
    _no_traceback(served)
    assert "config: no file, the defaults" in served.banner
    assert "watchkeeper --config ./watchkeeper.toml serve" in served.stderr, served.stderr


# -- --config after the command ------------------------------------------------------------------


@pytest.mark.parametrize(
    "after",
    [
        ("db", "upgrade", "--config", "{config}"),
        ("db", "upgrade", "-c", "{config}"),
        ("db", "upgrade", "--config={config}"),
        ("db", "--config", "{config}", "upgrade"),
    ],
)
def test_config_after_the_command_reads_the_same_file(
    folder: Folder, after: tuple[str, ...]
) -> None:
    config = _write_config(folder, "ours.toml")
    result = folder.run(*(word.format(config=config) for word in after))
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert (folder.path / "from-file" / "watchkeeper.db").is_file()
    assert not (folder.path / ".watchkeeper").exists()


def test_both_orders_find_the_same_server(folder: Folder) -> None:
    port = free_port()  # nothing listens there: the message names where the URL came from
    config = _write_config(folder, "ours.toml", port=port)
    before = folder.run("--config", str(config), "token", "list", "--token", "t")
    after = folder.run("token", "list", "--token", "t", "--config", str(config))
    for result in (before, after):
        _no_traceback(result)
        assert result.returncode == 1
        assert f"http://127.0.0.1:{port} (from [server] of {config})" in result.stderr
    assert before.stderr == after.stderr


def test_both_orders_give_serve_the_same_file(folder: Folder) -> None:
    config = _write_config(folder, "ours.toml")
    before = folder.serve("--config", str(config), "serve")
    after = folder.serve("serve", "--config", str(config))
    for served in (before, after):
        _no_traceback(served)
        assert f"config: {config.resolve()}" in served.banner
    assert str(folder.path / "from-file") in after.banner


def test_a_bad_file_after_the_command_is_the_same_error(folder: Folder) -> None:
    missing = str(folder.path / "missing.toml")
    before = folder.run("--config", missing, "db", "upgrade")
    after = folder.run("db", "upgrade", "--config", missing)
    for result in (before, after):
        _no_traceback(result)
        assert result.returncode == 2
        assert "no such configuration file" in result.stderr
    assert before.stderr == after.stderr


def test_config_after_the_child_command_of_run_is_the_childs(folder: Folder) -> None:
    # `run` hands every word after the command it starts to that command, --config too.
    config = _write_config(folder, "ours.toml")
    result = folder.run(
        "run",
        "--config",
        str(config),
        "--",
        sys.executable,
        "-c",
        "import sys; print(sys.argv[1:])",
        "--config",
        "x.toml",
    )
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert "['--config', 'x.toml']" in result.stdout, result.stdout + result.stderr
    assert (folder.path / "from-file").is_dir()


# -- migrations stay quiet -----------------------------------------------------------------------


def test_serve_on_a_new_store_prints_no_alembic_lines(folder: Folder) -> None:
    served = folder.serve("serve")
    _no_traceback(served)
    served.banner  # noqa: B018 - it asserts the banner came
    assert "alembic" not in served.stderr, served.stderr
    ours = [line for line in served.stderr.splitlines() if "watchkeeper.store.migrate" in line]
    assert len(ours) == 1 and "Created the database schema at revision" in ours[0], ours


@pytest.mark.parametrize(
    "words",
    [("runs",), ("report", "progress", "crawl", "r1", "--step", "s"), ("run", "--", "true")],
    ids=["runs", "report", "run"],
)
def test_the_fast_commands_name_the_unread_file_too(folder: Folder, words: tuple[str, ...]) -> None:
    """``runs``, ``report`` and ``run`` skip the full command line when they can; never
    at the price of the notice."""
    _write_config(folder)
    result = folder.run(*words)
    _no_traceback(result)
    assert f"watchkeeper --config ./watchkeeper.toml {words[0]}" in result.stderr, result.stderr
