"""``watchkeeper report progress`` and ``report heartbeat`` without the command-line framework.

Shell scripts send these reports in their loops, so each one's start-up is paid
again and again; Typer, Rich and pydantic are most of it. :func:`main` reads
exactly the forms those two commands take and sends the one HTTP call with the
SDK's client. Anything it does not read exactly (help, an unknown or repeated
option, an option's value that looks like an option, ``--debug``, ``--``, a
``[server]`` table to be read from the configuration, shell completion) it
leaves to the full command line, so what a user sees never differs. Errors are
told by the full command line's own printer, loaded only then.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

#: Each report this path sends: its options that take a value, every spelling, by field.
_REPORTS: dict[str, dict[str, str]] = {
    "progress": {"--step": "step", "-s": "step", "--server": "server", "--token": "token"},
    "heartbeat": {"--server": "server", "--token": "token"},
}
_CONFIG = frozenset({"--config", "-c"})


@dataclass(frozen=True)
class Report:
    """One report as the command line named it."""

    verb: str
    kind: str
    run_id: str
    options: dict[str, str]
    #: ``--config`` of this invocation, or ``WATCHKEEPER_CONFIG`` (``None``: neither).
    config_path: str | None


def parse(argv: Sequence[str]) -> Report | None:
    """The report ``argv`` names, when it is surely one this path sends as the full one would;
    else ``None``."""
    if any(key.endswith("_COMPLETE") for key in os.environ):
        return None
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
    if len(words) < 2 or words[0] != "report" or words[1] not in _REPORTS:
        return None
    spellings = _REPORTS[words[1]]
    options: dict[str, str] = {}
    positional: list[str] = []
    rest = iter(words[2:])
    for word in rest:
        if not word.startswith("-"):
            positional.append(word)
            continue
        name, equals, value = word.partition("=") if word.startswith("--") else (word, "", "")
        field = spellings.get(name)
        if field is None or field in options:
            return None
        if not equals:
            following = next(rest, None)
            if following is None or following.startswith("-"):
                return None
            value = following
        options[field] = value
    if len(positional) == 1 and os.environ.get("WATCHKEEPER_RUN_ID"):
        positional.append(os.environ["WATCHKEEPER_RUN_ID"])
    if len(positional) != 2:
        return None
    config_path = config or os.environ.get("WATCHKEEPER_CONFIG") or None
    return Report(words[1], positional[0], positional[1], options, config_path)


def server_url(report: Report) -> tuple[str, str] | None:
    """The server's URL and where it came from, as the full command line finds them;
    ``None`` when that means reading the configuration (left to the full path)."""
    from watchkeeper.cli_server import find_server

    return find_server(report.options.get("server"), report.config_path, read_config=False)


def main(argv: Sequence[str]) -> int | None:
    """Send the report ``argv`` names and return the exit status; ``None``: not one to send
    here (the caller runs the full command line)."""
    report = parse(argv)
    found = None if report is None else server_url(report)
    if report is None or found is None:
        return None
    url, source = found
    try:
        _send(report, url, source)
    except KeyboardInterrupt:
        from watchkeeper.cli.common import err_console

        err_console.print("aborted")
        return 130
    except Exception as exc:  # noqa: BLE001 - told as the full command line tells it
        return _told(exc)
    return 0


def _send(report: Report, url: str, source: str) -> None:
    from watchkeeper.cli_server import cli_client

    extra = (report.options.get("step"),) if report.verb == "progress" else ()
    with cli_client(url, source, report.options.get("token")) as client:
        getattr(client, report.verb)(report.kind, report.run_id, *extra)


def _told(exc: Exception) -> int:
    """Print ``exc`` as :func:`watchkeeper.cli.main` does without ``--debug``; its exit status."""
    from watchkeeper.cli import _report, _say
    from watchkeeper.errors import WatchkeeperError

    _report(exc, False)
    if isinstance(exc, WatchkeeperError):
        return exc.exit_code
    _say("run again with --debug for the traceback")
    return 1
