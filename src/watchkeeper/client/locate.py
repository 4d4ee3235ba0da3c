"""Where the command line finds its server, and what it says when none answers there.

Kept apart from :mod:`watchkeeper.cli.app` (which loads Typer) so the report fast path
(:mod:`watchkeeper.cli.fast.commands`) and the full command line share one lookup and one
message. Nothing heavy is imported until a function needs it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchkeeper.client import Client

_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}  # noqa: S104 - compared, not bound


def find_server(
    server: str | None, config_path: str | None, *, read_config: bool = True
) -> tuple[str, str] | None:
    """The server's URL and where it came from: ``--server``, ``WATCHKEEPER_URL``, the
    ``[server]`` table of ``config_path``, or the default URL.

    ``None`` when the answer is in the configuration and ``read_config`` is false
    (the caller would rather not load it).
    """
    from watchkeeper.client.wire import DEFAULT_URL, URL_ENV

    if server:
        return server.rstrip("/"), "--server"
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV].rstrip("/"), URL_ENV
    if config_path:
        if not read_config:
            return None
        from watchkeeper import config

        loaded = config.load(config_path)
        # A server listening on every address is reached on loopback from its own host.
        host = _ANY_ADDRESS.get(loaded.server.host, loaded.server.host)
        return f"http://{host}:{loaded.server.port}", f"[server] of {config_path}"
    return DEFAULT_URL, "the default"


def cli_client(url: str, source: str, token: str | None) -> Client:
    """The SDK's client of ``url`` (found from ``source``), whose "nothing answers" says
    how to point the command line elsewhere."""
    from watchkeeper.client import Client
    from watchkeeper.client.wire import TOKEN_ENV
    from watchkeeper.errors import ClientError

    class CliClient(Client):
        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            try:
                return super().request(method, path, **kwargs)
            except ClientError as exc:
                if exc.code != "unreachable":
                    raise
                raise ClientError(0, "unreachable", unreachable(url, source)) from exc.__cause__

    return CliClient(url, token or os.environ.get(TOKEN_ENV) or None)


def unreachable(url: str, source: str) -> str:
    """What to say when no server answers at ``url`` (found from ``source``)."""
    from watchkeeper.client.wire import URL_ENV

    return (
        f"cannot reach watchkeeper at {url} (from {source}): no watchkeeper server answers there."
        " Start one with `watchkeeper serve`, or point at yours with --server URL"
        f" or {URL_ENV} (or --config FILE with its [server] table)"
    )


def answers(url: str, timeout_s: float = 0.5) -> bool:
    """Whether anything takes a connection at ``url``'s host and port (on loopback, a
    refusal comes at once): where no server was named, whether one is in reach."""
    import socket
    from urllib.parse import urlsplit

    try:
        where = urlsplit(url)
        port = where.port or (443 if where.scheme == "https" else 80)
    except ValueError:
        return False
    try:
        with socket.create_connection((where.hostname or "127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def shown(folder: str | os.PathLike[str]) -> str:
    """A data folder as the notes name it: ``./…`` inside the working folder, else absolute."""
    from pathlib import Path

    absolute = Path(os.path.abspath(folder))
    try:
        inside = absolute.relative_to(Path.cwd())
    except ValueError:
        return str(absolute)
    return f"./{inside}" if str(inside) != "." else "."


def no_server(url: str, done: str, folder: str | os.PathLike[str]) -> str:
    """The note of a command that used the local store because nothing answers at ``url``:
    ``done`` is what it did there (``recorded in``, ``read from``, ``settled in``)."""
    return f"no server answers at {url}: {done} {shown(folder)}"


def note(text: str) -> None:
    """One line on stderr, as it is: the fast path and the full command line say it alike."""
    import sys

    sys.stderr.write(text + "\n")
    sys.stderr.flush()
