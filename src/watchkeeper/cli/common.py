"""What every command shares: the configuration, the console, the local runtime."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.runtime import Runtime


class _LazyConsole:
    """A Rich console created on first use: most commands print little, and start fast."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        return getattr(self._console, name)


console: Any = _LazyConsole()
err_console: Any = _LazyConsole(stderr=True)


@dataclass
class CliState:
    """Global options, kept on the Typer context."""

    config_path: str | None = None
    debug: bool = False


def state(ctx: typer.Context) -> CliState:
    """The global options of this invocation."""
    found = ctx.find_root().obj
    return found if isinstance(found, CliState) else CliState()


def settings(ctx: typer.Context) -> Settings:
    """Load and validate the configuration (``--config`` or ``WATCHKEEPER_CONFIG``)."""
    from watchkeeper import config

    return config.load(state(ctx).config_path)


@contextlib.contextmanager
def local_runtime(ctx: typer.Context) -> Iterator[Runtime]:
    """The local store and adapters, opened as ``serve`` would, closed on the way out."""
    from watchkeeper.runtime import Runtime

    runtime = Runtime.open(settings(ctx))
    try:
        yield runtime
    finally:
        runtime.close()
