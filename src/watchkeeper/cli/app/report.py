"""``watchkeeper report``: report work from shell scripts."""

from __future__ import annotations

import typer

from watchkeeper.cli.app.options import SERVER, TOKEN, connect, parse_duration, say

app = typer.Typer(
    help="Report work to a watchkeeper server (WATCHKEEPER_URL, WATCHKEEPER_TOKEN).",
    no_args_is_help=True,
)

_KIND = typer.Argument(..., help="the kind of work, e.g. crawl")
_RUN_ID = typer.Argument(
    ..., envvar="WATCHKEEPER_RUN_ID", help="the run's id (default: $WATCHKEEPER_RUN_ID)"
)


def _parse_origin(value: str | None) -> dict[str, str] | None:
    """``slack:C123/1700000000.1`` -> platform, chat and thread.

    ``github:OWNER/REPO#N`` names a pull request or issue: the repository is the chat,
    the number the thread.
    """
    if not value:
        return None
    from watchkeeper.errors import InvalidInput

    platform, _, rest = value.partition(":")
    if platform == "github":
        from watchkeeper.procs.github_results import parse

        try:
            return parse(rest)
        except ValueError as exc:
            raise InvalidInput(f"--origin {value!r}: {exc}") from None
    if platform not in {"telegram", "discord", "slack", "web"} or not rest:
        raise InvalidInput(
            f"--origin {value!r}: write PLATFORM:CHAT[/THREAD], "
            "PLATFORM one of telegram, discord, slack, web, or github:OWNER/REPO#N"
        )
    chat, _, thread = rest.partition("/")
    origin = {"platform": platform, "chat_id": chat}
    if thread:
        origin["thread_id"] = thread
    return origin


def _plain(name: str, summary: str) -> None:
    """Add ``report NAME KIND RUN_ID``: a report that carries nothing more."""

    def command(
        kind: str = _KIND,
        run_id: str = _RUN_ID,
        server: str | None = SERVER,
        token: str | None = TOKEN,
    ) -> None:
        with connect(server, token) as client:
            getattr(client, name)(kind, run_id)

    command.__doc__ = summary
    app.command(name)(command)


@app.command("start")
def start(
    kind: str = _KIND,
    title: str = typer.Argument(..., help="a short human name"),
    run_id: str | None = typer.Option(None, "--run-id", help="your id for it (default: a new one)"),
    budget: float | None = typer.Option(
        None, "--budget", help="seconds without progress before stalled"
    ),
    expected: float | None = typer.Option(
        None, "--expected", help="seconds it is expected to take"
    ),
    lease: float | None = typer.Option(
        None, "--lease", help="seconds between reports before stuck"
    ),
    effects: str = typer.Option("unknown", "--effects", help="none or unknown"),
    origin: str | None = typer.Option(None, "--origin", help="PLATFORM:CHAT[/THREAD]"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Report that work started; prints its run id."""
    with connect(server, token) as client:
        run = client.start(
            kind,
            title,
            run_id=run_id,
            origin=_parse_origin(origin),
            effects=effects,
            budget_s=budget,
            expected_s=expected,
            lease_s=lease,
        )
    say(run["run_id"])


@app.command("progress")
def progress(
    kind: str = _KIND,
    run_id: str = _RUN_ID,
    step: str | None = typer.Option(None, "--step", "-s", help="what moved: the step it is at"),
    done: int | None = typer.Option(
        None, "--done", min=0, help="how many are done (pages, tests, tokens)"
    ),
    total: int | None = typer.Option(None, "--total", min=0, help="how many in all"),
    budget: str | None = typer.Option(
        None,
        "--budget",
        help="how long this step may go without another report before stalled, e.g. 30m "
        "(until the next report)",
    ),
    expected: str | None = typer.Option(
        None, "--expected", help="how long this step is expected to take, e.g. 90s"
    ),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Report where the work is. The same step and counters as the report before is not
    progress: the kind's loop_after of them in a row (default 5) make the run looping."""
    budget_s = parse_duration(budget, "--budget")
    expected_s = parse_duration(expected, "--expected")
    with connect(server, token) as client:
        client.progress(
            kind, run_id, step, done=done, total=total, budget_s=budget_s, expected_s=expected_s
        )


_plain("heartbeat", "Report that the owner is alive (not progress).")


@app.command("waiting")
def waiting(
    kind: str = _KIND,
    run_id: str = _RUN_ID,
    reason: str | None = typer.Option(None, "--reason", help="what it waits for"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Report that the work waits for a person."""
    with connect(server, token) as client:
        client.waiting(kind, run_id, reason)


_plain("finish", "Report success.")


@app.command("fail")
def fail(
    kind: str = _KIND,
    run_id: str = _RUN_ID,
    reason: str = typer.Option(..., "--reason", help="why it failed"),
    fingerprint: str | None = typer.Option(
        None, "--fingerprint", help="identifies the same failure"
    ),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Report failure."""
    with connect(server, token) as client:
        client.fail(kind, run_id, reason, fingerprint=fingerprint)
