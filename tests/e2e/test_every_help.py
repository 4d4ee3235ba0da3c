"""``--help`` of every command and sub-command, through the real entry point.

Help text is Rich markup to Typer: a literal ``[/THREAD]`` in an option's help
ended the help in a markup error, so each help is run in a narrow terminal with
the Rich, Typer and Click installed here.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from tests.support.cli import wk
from watchkeeper.cli import app


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words, the group itself first, sub-commands after their group."""
    # Typer builds on its own copy of Click in some versions: a group is what has commands.
    found = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found.extend(_paths(sub, (*prefix, name)))
    return found


COMMANDS = _paths(typer.main.get_command(app))


def test_the_walk_finds_the_commands_known_to_have_crashed() -> None:
    assert ("run",) in COMMANDS
    assert ("report", "start") in COMMANDS
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "watchkeeper")
def test_help_prints_usage_and_exits_cleanly(words: tuple[str, ...]) -> None:
    done = wk(*words, "--help", columns=60)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    assert done.stderr == ""
    assert "error" not in done.stdout.lower().split("usage:")[0]


def test_help_shows_text_in_brackets_as_written() -> None:
    # A closing tag used to crash the help; an opening one vanished from it without a word.
    assert "PLATFORM:CHAT[/THREAD]" in wk("run", "--help", columns=200).stdout
    assert "[server] port" in wk("demo", "--help", columns=200).stdout
