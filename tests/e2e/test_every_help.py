"""``--help`` of every command and sub-command, through the real entry point.

Help text is Rich markup to Typer: a literal ``[/THREAD]`` in an option's help
ended the help in a markup error, so each help is run in a narrow terminal with
the Rich, Typer and Click installed here. Every command's help runs in this process
(the same ``main`` the installed command calls); one runs as a real process.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer.main

from tests.support.cli import wk, wk_here
from watchkeeper.cli.app import app


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words, the group itself first, sub-commands after their group."""
    # Typer builds on its own copy of Click in some versions: a group is what has commands.
    found = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found.extend(_paths(sub, (*prefix, name)))
    return found


COMMANDS = _paths(typer.main.get_command(app))
#: Typer's type tags: <str>, <int range>, <list[str]>, <path>, <float>...
TYPE_TAG = re.compile(r"<(?:str|int|float|bool|path|datetime|list\[[^>]*\]|[a-z]+ range)>")


def test_the_walk_finds_the_commands_known_to_have_crashed() -> None:
    assert ("run",) in COMMANDS
    assert ("report", "start") in COMMANDS
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "watchkeeper")
def test_help_prints_usage_and_exits_cleanly(words: tuple[str, ...]) -> None:
    done = wk_here(*words, "--help", columns=60)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    assert done.stderr == ""
    assert "error" not in done.stdout.lower().split("usage:")[0]
    # A value is named by what to type (FILE, URL, DURATION), never by a type tag like <str>.
    tags = TYPE_TAG.findall(done.stdout)
    assert tags == [], f"{' '.join(words)} --help shows type tags: {tags}"


def test_help_shows_text_in_brackets_as_written() -> None:
    # A closing tag used to crash the help; an opening one vanished from it without a word.
    assert "PLATFORM:CHAT[/THREAD]" in wk("run", "--help", columns=200).stdout  # a process
    assert "[server] port" in wk_here("demo", "--help", columns=200).stdout


@pytest.mark.parametrize(
    ("words", "shown"),
    [
        ((), ["-c, --config FILE"]),
        (("run",), ["--on-done-url URL", "--budget DURATION", "--server URL", "CMD"]),
        (("status",), ["{RUN_ID}", "--token TOKEN", "--store STORE"]),
        (("runner",), ["--capacity N", "--heartbeat-interval SECONDS", "--pass-env NAME"]),
        (("park",), ["--until RUN_ID"]),
    ],
)
def test_options_and_arguments_are_named_by_what_to_type(
    words: tuple[str, ...], shown: list[str]
) -> None:
    done = wk_here(*words, "--help", columns=200)
    for expected in shown:
        assert expected in done.stdout, done.stdout
