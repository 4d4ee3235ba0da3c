"""The ``watchkeeper`` command. One module per noun; errors are printed in one place."""

from __future__ import annotations

import os
import sys
import traceback
from functools import cache
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperGroup

from watchkeeper.cli.app import fastparams, metavars
from watchkeeper.cli.app.common import CliState, begin, state
from watchkeeper.cli.console import err_console
from watchkeeper.errors import WatchkeeperError
from watchkeeper.paths import CONFIG_ENV

# Plain option values are then converted without loading pydantic (see the module).
fastparams.install()
# Arguments are shown by their metavars, without Typer's type tags (see the module).
metavars.install()

#: Every command in the order ``--help`` lists them: its words, the module under
#: ``watchkeeper.cli.app`` that holds it, the attribute, and how it is added ("command": a
#: function; "group": a Typer app; "stop": a function whose options end at its first argument).
#: A command line that names one of them imports only that module (see :func:`main`).
COMMANDS: tuple[tuple[str, str, str, str], ...] = (
    ("serve", "serve", "serve", "command"),
    ("demo", "demo", "demo", "command"),
    ("runs", "runs", "runs", "command"),
    ("show", "show", "show", "command"),
    ("replicas", "replicas", "replicas", "command"),
    ("report", "report", "app", "group"),
    ("token", "token", "app", "group"),
    ("db", "db", "app", "group"),
    ("incidents", "silences", "incidents_app", "incidents"),
    ("silence", "silences", "app", "group"),
    ("decide", "incidents", "decide", "command"),
    ("diagnose", "incidents", "diagnose", "command"),
    ("runbooks", "incidents", "runbooks", "command"),
    ("run", "procs", "run", "stop"),
    *(
        (name, "procs", name, "command")
        for name in ("ps", "status", "logs", "wait", "abort", "reclaim", "park", "parked")
    ),
    ("submit", "queue", "submit", "stop"),
    *(
        (name, "queue", name, "command")
        for name in ("jobs", "job", "cancel", "retry", "delete", "runner", "runners")
    ),
    ("task", "queue", "task_app", "group"),
    ("programs", "programs", "app", "group"),
    ("record", "timeline", "record", "command"),
    ("verify-record", "timeline", "verify_record", "command"),
    ("spend", "timeline", "spend", "command"),
    ("init", "init", "init", "command"),
    ("test-card", "testcard", "post_test_card", "command"),
    ("doctor", "doctor", "doctor", "command"),
    ("mcp", "mcp", "mcp", "command"),
)

#: Global options that take a value: the word after them is not a command.
_VALUED = frozenset({"--config", "-c"})


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        print(f"watchkeeper {version('watchkeeper')}")
        raise typer.Exit


def _global(
    ctx: typer.Context,
    config: str | None = typer.Option(
        None, "--config", "-c", envvar=CONFIG_ENV, help="watchkeeper.toml to use"
    ),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks on errors"),
    _version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="print the version; exit"
    ),
) -> None:
    ctx.obj = CliState(config_path=config, debug=debug, command_path=ctx.command_path)
    begin(ctx.obj)


def _config_late(ctx: typer.Context, value: str | None) -> None:
    found = state(ctx)
    found.command_path = ctx.command_path  # the innermost command parses last
    if value is not None:
        found.config_path = value


def _debug_late(ctx: typer.Context, value: bool) -> None:
    if value:
        state(ctx).debug = True


def _late(
    _config: str | None = typer.Option(
        None, "--config", "-c", hidden=True, expose_value=False, callback=_config_late
    ),
    _debug: bool = typer.Option(
        False, "--debug", hidden=True, expose_value=False, callback=_debug_late
    ),
) -> None:
    """The global options once more, for every command to take after its name."""


def _take_globals(command: Any, given: list[Any]) -> None:
    """Give ``command`` and the commands under it the global options, hidden from help.

    Users put ``--config`` where they put every other option, after the command, and
    "No such option" would not tell them it exists one word earlier. An option a
    command already has under the same name keeps its own meaning there.
    """
    if getattr(command, "_takes_globals", False):
        return
    command._takes_globals = True
    taken = {name for param in command.params for name in getattr(param, "opts", ())}
    command.params.extend(p for p in given if taken.isdisjoint(p.opts))
    for sub in getattr(command, "commands", {}).values():
        _take_globals(sub, given)


class _Root(TyperGroup):
    """The ``watchkeeper`` group: each command it hands out takes the global options too."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            _take_globals(found, _late_params())
        return found


@cache
def _late_params() -> list[Any]:
    """:func:`_late`'s options, made by Typer as it makes every other command's."""
    late = typer.Typer()
    late.command()(_late)
    return list(typer.main.get_command(late).params)


def build(names: frozenset[str] | None = None) -> typer.Typer:
    """The ``watchkeeper`` app with the commands ``names`` (default: every command)."""
    built = typer.Typer(
        cls=_Root,
        name="watchkeeper",
        help="Supervise long-running work by its progress.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        # Help is plain text: `[/THREAD]` or `[server]` in it is what the user types, not markup.
        rich_markup_mode=None,
    )
    built.callback()(_global)
    for name, module, attribute, how in COMMANDS:
        if names is not None and name not in names:
            continue
        found = getattr(import_module(f"watchkeeper.cli.app.{module}"), attribute)
        if how == "group":
            built.add_typer(found, name=name)
        elif how == "incidents":
            from watchkeeper.cli.app import incidents

            built.add_typer(found(incidents.incidents), name=name)
        elif how == "stop":
            built.command(name, context_settings={"allow_interspersed_args": False})(found)
        else:
            built.command(name)(found)
    metavars.fill(built)
    return built


def __getattr__(name: str) -> Any:
    # `watchkeeper.cli.app.app`, every command included, is built when first asked for.
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    built = globals()["app"] = build()
    return built


def _named(argv: list[str]) -> frozenset[str] | None:
    """The one command ``argv`` names, when it surely names one; else ``None`` (every command).

    Help, the version, an option this cannot place, shell completion and an unknown word
    all go to the whole app, so whatever they print stays exactly as before.
    """
    if any(key.endswith("_COMPLETE") for key in os.environ):
        return None
    known = {name for name, *_ in COMMANDS}
    words = iter(argv)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif word == "--debug" or word.startswith("--config="):
            continue
        elif word in known:
            return frozenset({word})
        elif word == "--version" and next(words, None) is None:
            return frozenset()  # it prints the version before any command is looked at
        else:
            return None
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the only place an exception becomes output and an exit status."""
    debug = "--debug" in (argv if argv is not None else sys.argv)
    try:
        # Standalone mode lets Typer print usage errors itself and end with SystemExit.
        _app(argv)(args=argv, prog_name="watchkeeper")
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


def _app(argv: list[str] | None) -> typer.Typer:
    """The whole app when it was built already (perhaps with more commands), else what
    ``argv`` needs."""
    built = globals().get("app")
    if isinstance(built, typer.Typer):
        return built
    names = _named(sys.argv[1:] if argv is None else argv)
    return build(names) if names is not None else __getattr__("app")


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
