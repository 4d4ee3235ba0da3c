"""What every command shares: the configuration, the console, the local runtime."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from watchkeeper.cli.console import err_console
from watchkeeper.errors import WatchkeeperError
from watchkeeper.paths import CONFIG_ENV, LOCAL_CONFIG

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.runtime import Runtime


@dataclass
class CliState:
    """Global options, kept on the Typer context."""

    config_path: str | None = None
    debug: bool = False
    #: The command's words as typed (``watchkeeper db upgrade``), for advice that repeats them.
    command_path: str = "watchkeeper COMMAND"
    #: Whether the unread ``./watchkeeper.toml`` was told of already.
    told_unread: bool = False


_invocation: list[CliState] = [CliState()]


def begin(found: CliState) -> None:
    """Make ``found`` the global options of the command line now running."""
    _invocation[0] = found


def invocation() -> CliState:
    """The global options of the command line now running, for code handed no context."""
    return _invocation[0]


def state(ctx: typer.Context) -> CliState:
    """The global options of this invocation."""
    found = ctx.find_root().obj
    return found if isinstance(found, CliState) else CliState()


def chosen_config(found: CliState) -> str | None:
    """The configuration file this invocation reads: ``--config``, else ``WATCHKEEPER_CONFIG``."""
    return found.config_path or os.environ.get(CONFIG_ENV) or None


def tell_unread(found: CliState) -> None:
    """Say on stderr, once, that ``./watchkeeper.toml`` is here but goes unread.

    The documented lookup is ``--config``, then ``WATCHKEEPER_CONFIG``, then the
    defaults: reading the file here instead would change which configuration a
    server started from another folder gets, so the file is named, not read.
    """
    if found.told_unread or chosen_config(found) or not os.path.isfile(LOCAL_CONFIG):
        return
    found.told_unread = True
    _, _, rest = found.command_path.partition(" ")
    err_console.print(
        f"note: ./{LOCAL_CONFIG} is here but not read: a configuration file is read only "
        f"from --config or {CONFIG_ENV}, so this runs on the defaults. To use it: "
        f"watchkeeper --config ./{LOCAL_CONFIG} {rest} (or export {CONFIG_ENV}=./{LOCAL_CONFIG})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


class NoStore(WatchkeeperError, http_status=404, code="no_store"):
    """A command that reads a local store found none where it looked; it makes none."""


def settings(ctx: typer.Context) -> Settings:
    """Load and validate the configuration (``--config`` or ``WATCHKEEPER_CONFIG``)."""
    from watchkeeper import config

    found = state(ctx)
    tell_unread(found)
    return config.load(found.config_path)


def pointed_at(loaded: Settings, store: str) -> Settings:
    """``loaded`` with its store replaced by ``store``: a database URL or a data folder."""
    if "://" in store:
        return loaded.model_copy(update={"database_url": store})
    return loaded.model_copy(update={"data_dir": Path(store), "database_url": None})


def store_settings(ctx: typer.Context, store: str | None) -> Settings:
    """The configuration, pointed at ``--store`` (a data folder or a database URL) when given;
    the store must exist either way."""
    loaded = settings(ctx)
    if store:
        loaded = pointed_at(loaded, store)
    require_store(loaded)
    return loaded


def require_store(loaded: Settings) -> None:
    """Raise :class:`NoStore` when the configured SQLite store does not exist.

    A server database (PostgreSQL) is named on purpose; whether it answers is
    told by the first query.
    """
    url = loaded.resolved_database_url
    if not url.startswith("sqlite:///"):
        return
    path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
    if path.is_file():
        return
    where = path.parent if path.name == "watchkeeper.db" else path
    raise NoStore(
        f"no watchkeeper store at {where}: this command reads the store `watchkeeper serve` "
        "keeps and never makes one. Run it where that server keeps its data, or name the "
        "store with --config FILE (or WATCHKEEPER_CONFIG) or --store PATH"
    )


@contextlib.contextmanager
def local_runtime(ctx: typer.Context, store: str | None = None) -> Iterator[Runtime]:
    """An existing local store and its adapters, opened as ``serve`` would, closed on the way
    out; ``store`` is ``--store`` (default: the configuration's)."""
    from watchkeeper.runtime import Runtime

    runtime = Runtime.open(store_settings(ctx, store))
    try:
        yield runtime
    finally:
        runtime.close()
