"""Where the process commands record and read: the server in reach, else the local store.

Every process command decides the same way, so what one records the next one finds:

- ``--store PATH`` (the commands that read): that local store, as asked;
- ``--server URL`` or ``WATCHKEEPER_URL``: that server. If it does not answer, the
  command says so and stops: nothing is started or recorded anywhere else;
- otherwise the ``[server]`` table of the configuration file, or the default URL:
  the server answering there, and when none does, the configuration's local store
  (``./.watchkeeper`` by default), said in one line on stderr. A command that only
  reads uses that store only if it exists; otherwise it says that no server answers.

``run`` records on a server while the command runs on this host
(:mod:`watchkeeper.cli.app.procs_recorded`), and says on stderr where it recorded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from watchkeeper.cli.app.common import NoStore, require_store, settings, store_settings
from watchkeeper.cli.app.options import server_url
from watchkeeper.client.locate import answers, cli_client, no_server, note
from watchkeeper.client.wire import TOKEN_ENV, URL_ENV

if TYPE_CHECKING:
    from watchkeeper.client import Client
    from watchkeeper.config import Settings


@dataclass(frozen=True)
class Place:
    """A server (``url``) or a local store (``local``), and how it was found."""

    url: str
    source: str
    token: str | None
    #: The configuration of the local store to use instead of the server at ``url``.
    local: Settings | None = None
    #: Whether the local store stands in for a server that did not answer (said so).
    instead: bool = False

    def client(self) -> Client:
        """A client of the server, whose "nothing answers" names where it was found."""
        return cli_client(self.url, self.source, self.token)

    def tell(self, done: str) -> None:
        """Say on stderr that the local store was used because no server answers; ``done``
        is what was done there (``recorded in``, ``read from``, ``settled in``)."""
        if self.local is not None and self.instead:
            note(no_server(self.url, done, self.local.data_dir))


def place(
    ctx: typer.Context,
    server: str | None,
    token: str | None,
    *,
    store: str | None = None,
    makes: bool = False,
) -> Place:
    """Where this command records or reads; ``makes``: it may make the local store."""
    token = token or os.environ.get(TOKEN_ENV) or None
    if store:
        return Place("", "--store", token, store_settings(ctx, store))
    url, source = server_url(server)
    if server or os.environ.get(URL_ENV) or answers(url):
        return Place(url, source, token)
    loaded = settings(ctx)
    if not makes:
        try:
            require_store(loaded)
        except NoStore:
            return Place(url, source, token)  # reading it tells that nothing answers there
    return Place(url, source, token, loaded, instead=True)
