"""``watchkeeper report``: report work from shell scripts."""

from __future__ import annotations

import typer

from watchkeeper.cli.common import console

app = typer.Typer(
    help="Report work to a watchkeeper server (WATCHKEEPER_URL, WATCHKEEPER_TOKEN).",
    no_args_is_help=True,
)

_SERVER = typer.Option(None, "--server", envvar="WATCHKEEPER_URL", help="server URL")
_TOKEN = typer.Option(None, "--token", envvar="WATCHKEEPER_TOKEN", help="API token")
_RUN_ID = typer.Argument(
    ..., envvar="WATCHKEEPER_RUN_ID", help="the run's id (default: $WATCHKEEPER_RUN_ID)"
)


def _client(server: str | None, token: str | None):  # type: ignore[no-untyped-def]
    from watchkeeper.client import Client

    return Client(server, token)


def _parse_origin(value: str | None) -> dict[str, str] | None:
    """``slack:C123/1700000000.1`` -> platform, chat and thread."""
    if not value:
        return None
    from watchkeeper.errors import InvalidInput

    platform, _, rest = value.partition(":")
    if platform not in {"telegram", "discord", "slack", "web"} or not rest:
        raise InvalidInput(
            f"--origin {value!r}: write PLATFORM:CHAT[/THREAD], "
            "PLATFORM one of telegram, discord, slack, web"
        )
    chat, _, thread = rest.partition("/")
    origin = {"platform": platform, "chat_id": chat}
    if thread:
        origin["thread_id"] = thread
    return origin


@app.command("start")
def start(
    kind: str = typer.Argument(..., help="the kind of work, e.g. crawl"),
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
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Report that work started; prints its run id."""
    with _client(server, token) as client:
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
    console.print(run["run_id"], highlight=False)


@app.command("progress")
def progress(
    kind: str = typer.Argument(...),
    run_id: str = _RUN_ID,
    step: str | None = typer.Option(None, "--step", "-s", help="what moved"),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Report progress."""
    with _client(server, token) as client:
        client.progress(kind, run_id, step)


@app.command("heartbeat")
def heartbeat(
    kind: str = typer.Argument(...),
    run_id: str = _RUN_ID,
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Report that the owner is alive (not progress)."""
    with _client(server, token) as client:
        client.heartbeat(kind, run_id)


@app.command("waiting")
def waiting(
    kind: str = typer.Argument(...),
    run_id: str = _RUN_ID,
    reason: str | None = typer.Option(None, "--reason", help="what it waits for"),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Report that the work waits for a person."""
    with _client(server, token) as client:
        client.waiting(kind, run_id, reason)


@app.command("finish")
def finish(
    kind: str = typer.Argument(...),
    run_id: str = _RUN_ID,
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Report success."""
    with _client(server, token) as client:
        client.finish(kind, run_id)


@app.command("fail")
def fail(
    kind: str = typer.Argument(...),
    run_id: str = _RUN_ID,
    reason: str = typer.Option(..., "--reason", help="why it failed"),
    fingerprint: str | None = typer.Option(
        None, "--fingerprint", help="identifies the same failure"
    ),
    server: str | None = _SERVER,
    token: str | None = _TOKEN,
) -> None:
    """Report failure."""
    with _client(server, token) as client:
        client.fail(kind, run_id, reason, fingerprint=fingerprint)
