"""``watchkeeper token``: API tokens.

``create`` asks the server (an admin ``--token``), so the token is one that
server accepts; with ``--store PATH`` it writes into that existing local store
instead. ``list`` and ``revoke`` work on the store of the configuration (or
``--store``), which must exist: no token command makes a store.
"""

from __future__ import annotations

from datetime import datetime

import typer

from watchkeeper.cli.common import local_runtime
from watchkeeper.cli.options import SERVER, STORE, TOKEN, connect, print_table, say

app = typer.Typer(help="API tokens.", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    role: str = typer.Option(..., "--role", "-r", help="admin, reporter or viewer"),
    name: str = typer.Option("cli", "--name", help="a label to recognise it by"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Create a token on the server (or in --store); its secret is printed once."""
    if store:
        with local_runtime(ctx, store) as runtime:
            info, secret = runtime.tokens.create(role, name)
        say(f"token {info.id} ({info.role.value}, {info.name}):")
        say(secret)
        return
    with connect(server, token) as client:
        made = client.request_object("POST", "/api/v1/tokens", json={"role": role, "name": name})
    say(f"token {made['id']} ({made['role']}, {made['name']}):")
    say(made["token"])


@app.command("list")
def list_tokens(ctx: typer.Context, store: str | None = STORE) -> None:
    """List tokens (never their secrets)."""
    with local_runtime(ctx, store) as runtime:
        tokens = runtime.tokens.list()
    rows = [
        [str(t.id), t.name, t.role.value, _minute(t.created_at), _minute(t.revoked_at)]
        for t in tokens
    ]
    print_table("Tokens", ("id", "name", "role", "created", "revoked"), rows)


def _minute(at: datetime | None) -> str:
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M")


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: int = typer.Argument(..., help="the token's id"),
    store: str | None = STORE,
) -> None:
    """Revoke a token."""
    with local_runtime(ctx, store) as runtime:
        runtime.tokens.revoke(token_id)
    say(f"token {token_id} revoked")
