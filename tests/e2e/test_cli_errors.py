"""How the command line reports errors, run as a real subprocess: the message and its causes
on stderr, one line each; the traceback only with --debug; a bug of ours still one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from ..support.cli import wk

UNREACHABLE = {"WATCHKEEPER_URL": "http://127.0.0.1:9", "WATCHKEEPER_TOKEN": "t"}

# The real command line with one more command that fails the way a bug would.
EXPLODING = textwrap.dedent(
    """
    import sys

    from watchkeeper.cli.app import app, main

    @app.command("explode")
    def explode() -> None:
        try:
            {}["missing"]
        except KeyError as exc:
            raise RuntimeError("the widget broke") from exc

    sys.exit(main(sys.argv[1:]))
    """
)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return wk(*args, env=env, columns=60, command=(sys.executable,))


def test_an_error_and_its_cause_one_line_each_on_stderr() -> None:
    result = run("-m", "watchkeeper", "report", "start", "crawl", "x", env=UNREACHABLE)
    assert result.returncode == 1
    assert result.stdout == ""
    first, *causes = result.stderr.splitlines()
    assert first.startswith("error: cannot reach watchkeeper at http://127.0.0.1:9")
    assert causes and all(line.startswith("  caused by: ") for line in causes)
    assert "Traceback" not in result.stderr


def test_the_traceback_only_with_debug() -> None:
    result = run("-m", "watchkeeper", "--debug", "report", "start", "crawl", "x", env=UNREACHABLE)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "\nerror: cannot reach watchkeeper at http://127.0.0.1:9" in result.stderr
    assert "\n  caused by: " in result.stderr


def test_an_unexpected_exception_is_one_line_and_a_hint() -> None:
    result = run("-c", EXPLODING, "explode")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: the widget broke",
        "  caused by: 'missing'",
        "run again with --debug for the traceback",
    ]


def test_an_unexpected_exception_with_debug_shows_the_traceback() -> None:
    result = run("-c", EXPLODING, "--debug", "explode")
    assert result.returncode == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert "in explode\nRuntimeError: the widget broke\n" in result.stderr
    assert result.stderr.rstrip().endswith("error: the widget broke\n  caused by: 'missing'")
    assert "--debug for the traceback" not in result.stderr


def test_a_cause_repeated_by_a_wrapping_library_is_said_once() -> None:
    # Nothing listens on port 9 of loopback: httpx wraps the refusal in an error of its own.
    done = wk("runs", "--server", "http://127.0.0.1:9")
    assert done.returncode == 1
    causes = [line for line in done.stderr.splitlines() if "caused by:" in line]
    assert causes and len(causes) == len(set(causes)), done.stderr
