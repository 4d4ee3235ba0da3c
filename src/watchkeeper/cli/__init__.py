"""The ``watchkeeper`` command. One module per noun; errors are printed in one place."""

from __future__ import annotations

import sys
import traceback

import typer

from watchkeeper.cli import (
    db,
    demo,
    doctor,
    fastparams,
    incidents,
    init,
    replicas,
    report,
    runs,
    serve,
    show,
    token,
)
from watchkeeper.cli import procs as procs_cli
from watchkeeper.cli import queue as queue_cli
from watchkeeper.cli import silences as silences_cli
from watchkeeper.cli import testcard as testcard_cli
from watchkeeper.cli import timeline as timeline_cli
from watchkeeper.cli.common import CliState, err_console
from watchkeeper.errors import WatchkeeperError

# Plain option values are then converted without loading pydantic (see the module).
fastparams.install()

app = typer.Typer(
    name="watchkeeper",
    help="Supervise long-running work by its progress.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Help is plain text: `[/THREAD]` or `[server]` in it is what the user types, not markup.
    rich_markup_mode=None,
)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        print(f"watchkeeper {version('watchkeeper')}")
        raise typer.Exit


@app.callback()
def _global(
    ctx: typer.Context,
    config: str | None = typer.Option(
        None, "--config", "-c", envvar="WATCHKEEPER_CONFIG", help="watchkeeper.toml to use"
    ),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks on errors"),
    _version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="print the version; exit"
    ),
) -> None:
    ctx.obj = CliState(config_path=config, debug=debug)


app.command("serve")(serve.serve)
app.command("demo")(demo.demo)
app.command("runs")(runs.runs)
app.command("show")(show.show)
app.command("replicas")(replicas.replicas)
app.add_typer(report.app, name="report")
app.add_typer(token.app, name="token")
app.add_typer(db.app, name="db")
app.add_typer(silences_cli.incidents_app(incidents.incidents), name="incidents")
app.add_typer(silences_cli.app, name="silence")
for _name in ("decide", "diagnose", "runbooks"):
    app.command(_name)(getattr(incidents, _name))
app.command("run", context_settings={"allow_interspersed_args": False})(procs_cli.run)
for _name in ("ps", "status", "logs", "wait", "abort", "reclaim", "park", "parked"):
    app.command(_name)(getattr(procs_cli, _name))
app.command("submit", context_settings={"allow_interspersed_args": False})(queue_cli.submit)
for _name in ("jobs", "job", "cancel", "retry", "delete", "runner", "runners"):
    app.command(_name)(getattr(queue_cli, _name))
app.add_typer(queue_cli.task_app, name="task")
app.command("record")(timeline_cli.record)
app.command("verify-record")(timeline_cli.verify_record)
app.command("spend")(timeline_cli.spend)
app.command("init")(init.init)
app.command("test-card")(testcard_cli.post_test_card)
app.command("doctor")(doctor.doctor)


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
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug of ours, told in one line
        _report(exc, debug)
        if not debug:
            _say("run again with --debug for the traceback")
        return 1
    return 0


def _report(exc: BaseException, debug: bool) -> None:
    """The error and each of its causes on one line each, on stderr; the traceback on --debug."""
    if debug:
        _say(traceback.format_exc())
    _say(f"error: {str(exc) or type(exc).__name__}")
    said: set[str] = set()
    for cause in _causes(exc):
        # Libraries often wrap an error in one that says the same words: say them once.
        if (line := _line(cause)) not in said:
            said.add(line)
            _say(f"  caused by: {line}")


def _causes(exc: BaseException) -> list[BaseException]:
    """What led to ``exc``, nearest first: explicit causes, and context nobody suppressed."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None:
        following = current.__cause__
        if following is None and not current.__suppress_context__:
            following = current.__context__
        if following is None or following is exc or following in found:
            break  # a chain that loops back on itself ends here
        found.append(following)
        current = following
    return found


def _line(exc: BaseException) -> str:
    """One line: the message, or the exception's name when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _say(text: str) -> None:
    # Messages often quote what the user typed or a URL read from the configuration.
    from watchkeeper.redact import redact

    err_console.print(redact(text), highlight=False, markup=False, soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
