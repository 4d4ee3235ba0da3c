"""``watchkeeper runs``, ``report progress`` (with its step, counters and step times),
``report heartbeat`` and ``mcp`` without the command-line framework.

``runs`` is what people type most, and shell scripts send reports in their loops, so
each one's start-up is paid again and again; Typer, pydantic and httpx are most of
it. :func:`main` reads exactly the forms these commands take, sends their one HTTP
call over the standard library (:mod:`watchkeeper.client.wire`) and prints through
the full command line's own consoles and tables. Anything it does not read exactly
(help, an unknown or repeated option, an option's value that looks like an option,
``--debug``, ``--``, ``runs --watch`` or ``--store``, a ``[server]`` table to be read
from the configuration, shell completion, a run id a URL would have to escape) it
leaves to the full command line, so what a user sees never differs. Errors are told
by the full command line's own printer, loaded only then.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from watchkeeper.paths import CONFIG_ENV, LOCAL_CONFIG

_SERVER = {"--server": "server", "--token": "token"}
_CONFIG = frozenset({"--config", "-c"})
#: Names that travel in a URL's path unchanged, so both HTTP clients send the same request.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:~+-]+")


@dataclass(frozen=True)
class _Form:
    """How one command this path serves is typed."""

    #: Its options that take a value, every spelling, by field.
    valued: dict[str, str]
    #: Its options that take none, every spelling, by field.
    flags: dict[str, str]
    #: Its arguments (``kind`` and ``run id`` for a report; the run id may come from
    #: ``WATCHKEEPER_RUN_ID``).
    arguments: int


#: What a progress report may say besides its step, as the full command line names it.
_REPORTED = {"--done": "done", "--total": "total", "--budget": "budget", "--expected": "expected"}
_FORMS: dict[tuple[str, ...], _Form] = {
    ("report", "progress"): _Form({"--step": "step", "-s": "step", **_REPORTED, **_SERVER}, {}, 2),
    ("report", "heartbeat"): _Form(_SERVER, {}, 2),
    ("runs",): _Form(_SERVER, {"--all": "all", "-a": "all", "--json": "json"}, 0),
    ("mcp",): _Form(_SERVER, {}, 0),
}


@dataclass(frozen=True)
class Command:
    """One command line this path serves, as it was typed."""

    words: tuple[str, ...]
    arguments: list[str]
    #: Options given, by field (a flag's value is ``""``).
    options: dict[str, str]
    #: ``--config`` of this invocation, or ``WATCHKEEPER_CONFIG`` (``None``: neither).
    config_path: str | None


def parse(argv: Sequence[str]) -> Command | None:
    """The command ``argv`` names, when it is surely one this path runs as the full one
    would; else ``None``."""
    found = split_config(argv)
    if found is None:
        return None
    config_path, words = found
    named = next((key for key in _FORMS if tuple(words[: len(key)]) == key), None)
    if named is None:
        return None
    form = _FORMS[named]
    read = _read(words[len(named) :], form)
    if read is None:
        return None
    arguments, options = read
    if form.arguments == 2 and len(arguments) == 1 and os.environ.get("WATCHKEEPER_RUN_ID"):
        arguments.append(os.environ["WATCHKEEPER_RUN_ID"])
    if len(arguments) != form.arguments or not all(map(_plain, arguments)):
        return None
    if report_body(options) is None:
        return None
    return Command(named, arguments, options, config_path)


def split_config(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """The configuration named (``--config`` or ``WATCHKEEPER_CONFIG``; ``None``: none) and
    the words after the global options; ``None`` when a fast path should not be taken."""
    if any(key.endswith("_COMPLETE") for key in os.environ):
        return None  # shell completion: the full command line answers it
    words = list(argv)
    config: str | None = None
    while words and (words[0] in _CONFIG or words[0].startswith("--config=")):
        word = words.pop(0)
        if word.startswith("--config="):
            config = word.removeprefix("--config=")
        elif not words or words[0].startswith("-"):
            return None
        else:
            config = words.pop(0)
    config = config or os.environ.get(CONFIG_ENV) or None
    if config is None and os.path.isfile(LOCAL_CONFIG):
        return None  # the full command line tells the user it goes unread
    return config, words


def read_options(
    words: list[str], valued: dict[str, str], flags: dict[str, str]
) -> tuple[list[str], dict[str, str]] | None:
    """The arguments and options of ``words`` (a flag's value is ``""``); ``None`` at
    anything this path does not read exactly as Typer would."""
    return _read(words, _Form(valued, flags, 0))


def _read(words: list[str], form: _Form) -> tuple[list[str], dict[str, str]] | None:
    """The arguments and options of ``words``; ``None`` at anything this path does not
    read exactly as Typer would."""
    options: dict[str, str] = {}
    arguments: list[str] = []
    rest = iter(words)
    for word in rest:
        if not word.startswith("-"):
            arguments.append(word)
            continue
        name, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        field = form.valued.get(name) or form.flags.get(name)
        if field is None or field in options:
            return None
        if name in form.flags:
            if equals:
                return None
            options[field] = ""
            continue
        if not equals:
            following = next(rest, None)
            if following is None or following.startswith("-"):
                return None
            value = following
        options[field] = value
    return arguments, options


def _plain(name: str) -> bool:
    return bool(_PLAIN_NAME.fullmatch(name)) and name not in {".", ".."}


def server_url(command: Command) -> tuple[str, str] | None:
    """The server's URL and where it came from, as the full command line finds them;
    ``None`` when that means reading the configuration (left to the full path)."""
    from watchkeeper.client.locate import find_server

    return find_server(command.options.get("server"), command.config_path, read_config=False)


def main(argv: Sequence[str]) -> int | None:
    """Run the command ``argv`` names and return the exit status; ``None``: not one to run
    here (the caller runs the full command line)."""
    command = parse(argv)
    found = None if command is None else server_url(command)
    if command is None or found is None:
        return None
    url, source = found
    try:
        _RUN[command.words](command, _Caller(url, source, command.options.get("token")))
    except KeyboardInterrupt:
        return aborted()
    except Exception as exc:  # noqa: BLE001 - told as the full command line tells it
        return told(exc)
    return 0


def aborted() -> int:
    """Say so as the full command line does after Ctrl-C; its exit status."""
    from watchkeeper.cli.console import err_console

    err_console.print("aborted")
    return 130


@dataclass(frozen=True)
class _Caller:
    """One API call to the server found, as the full command line's client makes it."""

    url: str
    source: str
    token: str | None

    def __call__(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
    ) -> Any:
        from watchkeeper.client import wire as client_wire
        from watchkeeper.client.locate import cli_client, unreachable
        from watchkeeper.errors import ClientError

        token = self.token or os.environ.get(client_wire.TOKEN_ENV) or None
        if not client_wire.plain_call_serves(self.url):
            with cli_client(self.url, self.source, token) as client:
                return client.request(method, path, json=body, params=query)
        try:
            return client_wire.plain_call(self.url, token, method, path, body=body, query=query)
        except ClientError as exc:
            if exc.code != "unreachable":
                raise
            raise ClientError(0, "unreachable", unreachable(self.url, self.source)) from (
                exc.__cause__
            )


def report_body(options: dict[str, str]) -> dict[str, Any] | None:
    """A report's body as the full command line sends it; ``None`` when a count is not
    plain digits or a duration not one more than zero (the full command line says why)."""
    body: dict[str, Any] = {}
    if "step" in options:
        body["step"] = options["step"]
    for name in ("done", "total"):
        if name in options:
            if not options[name].isascii() or not options[name].isdigit():
                return None
            body[name] = int(options[name])
    for name in ("budget", "expected"):
        if name in options:
            from watchkeeper.durations import seconds_of

            seconds = seconds_of(options[name])
            if seconds is None or seconds <= 0:
                return None
            body[f"{name}_s"] = seconds
    return body


def _send_report(command: Command, call: _Caller) -> None:
    from watchkeeper.client.wire import move_path

    kind, run_id = command.arguments
    verb = command.words[-1]
    call("POST", move_path(kind, run_id, verb), body=report_body(command.options))


def _runs(command: Command, call: _Caller) -> None:
    from watchkeeper.client.wire import RUNS_PATH

    every = "all" in command.options
    data = call("GET", RUNS_PATH, query={"all": "true" if every else "false"})
    if "json" in command.options:
        import json

        from watchkeeper.cli.console import console

        console.print_json(json.dumps(data))
        return
    from watchkeeper.cli.runs_table import render

    render(data, every)


def _mcp(command: Command, call: _Caller) -> None:
    from watchkeeper.mcp.opening import serve

    serve(call.url, call.source, call.token)


_RUN: dict[tuple[str, ...], Callable[[Command, _Caller], None]] = {
    ("report", "progress"): _send_report,
    ("report", "heartbeat"): _send_report,
    ("runs",): _runs,
    ("mcp",): _mcp,
}


def told(exc: Exception) -> int:
    """Print ``exc`` as the full command line does without ``--debug``; its exit status."""
    from watchkeeper.cli.app import _report, _say
    from watchkeeper.errors import WatchkeeperError

    _report(exc, False)
    if isinstance(exc, WatchkeeperError):
        return exc.exit_code
    _say("run again with --debug for the traceback")
    return 1
