"""The ``watchkeeper`` command. One module per noun; errors are printed in one place."""

from __future__ import annotations

import sys
import traceback

import typer

from watchkeeper.cli import db, demo, incidents, report, runs, serve, token
from watchkeeper.cli import procs as procs_cli
from watchkeeper.cli import queue as queue_cli
from watchkeeper.cli import timeline as timeline_cli
from watchkeeper.cli.common import CliState, err_console
from watchkeeper.errors import WatchkeeperError

app = typer.Typer(
    name="watchkeeper",
    help="Supervise long-running work by its progress.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _global(
    ctx: typer.Context,
    config: str | None = typer.Option(
        None, "--config", "-c", envvar="WATCHKEEPER_CONFIG", help="watchkeeper.toml to use"
    ),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks on errors"),
) -> None:
    ctx.obj = CliState(config_path=config, debug=debug)


app.command("serve")(serve.serve)
app.command("demo")(demo.demo)
app.command("runs")(runs.runs)
app.add_typer(report.app, name="report")
app.add_typer(token.app, name="token")
app.add_typer(db.app, name="db")
for _name in ("incidents", "decide", "diagnose", "runbooks"):
    app.command(_name)(getattr(incidents, _name))
app.command("run", context_settings={"allow_interspersed_args": False})(procs_cli.run)
for _name in ("ps", "status", "logs", "wait", "abort", "reclaim", "park", "parked"):
    app.command(_name)(getattr(procs_cli, _name))
app.command("submit", context_settings={"allow_interspersed_args": False})(queue_cli.submit)
for _name in ("jobs", "job", "cancel", "retry", "delete", "runner", "runners"):
    app.command(_name)(getattr(queue_cli, _name))
app.command("record")(timeline_cli.record)
app.command("verify-record")(timeline_cli.verify_record)
app.command("spend")(timeline_cli.spend)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the only place an exception becomes output and an exit status."""
    debug = "--debug" in (argv if argv is not None else sys.argv)
    try:
        # Standalone mode lets Typer print usage errors itself and end with SystemExit.
        app(args=argv, prog_name="watchkeeper")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except WatchkeeperError as exc:
        _report(exc, debug)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("aborted")
        return 130
    return 0


def _report(exc: BaseException, debug: bool) -> None:
    # Messages often quote what the user typed or a URL read from the configuration.
    from watchkeeper.redact import redact

    if debug:
        err_console.print(redact(traceback.format_exc()), highlight=False, markup=False)
    err_console.print(redact(f"error: {exc}"), highlight=False, markup=False)
    cause = exc.__cause__
    while cause is not None and debug:
        err_console.print(redact(f"  caused by: {cause}"), highlight=False, markup=False)
        cause = cause.__cause__


if __name__ == "__main__":
    sys.exit(main())
