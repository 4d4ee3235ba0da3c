"""``watchkeeper token``: API tokens.

Every token command asks the server (an admin ``--token``): ``create`` makes
a token that server accepts, ``list`` and ``revoke`` see and change what it
trusts. With ``--store PATH`` they work on that existing local store instead;
no token command makes a store.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer

from watchkeeper.cli.app.common import local_runtime
from watchkeeper.cli.app.options import SERVER, STORE, TOKEN, connect, print_table, say

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
def list_tokens(
    ctx: typer.Context,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """List the server's tokens (never their secrets); an admin --token."""
    if store:
        with local_runtime(ctx, store) as runtime:
            rows = [
                [str(t.id), t.name, t.role.value, _minute(t.created_at), _minute(t.revoked_at)]
                for t in runtime.tokens.list()
            ]
    else:
        with connect(server, token) as client:
            body = client.request_object("GET", "/api/v1/tokens")
        rows = [_api_row(t) for t in body["tokens"]]
    print_table("Tokens", ("id", "name", "role", "created", "revoked"), rows)


def _api_row(found: dict[str, Any]) -> list[str]:
    made, revoked = found["created_at"], found["revoked_at"]
    return [
        str(found["id"]),
        found["name"],
        found["role"],
        _minute(datetime.fromisoformat(made)),
        _minute(None if revoked is None else datetime.fromisoformat(revoked)),
    ]


def _minute(at: datetime | None) -> str:
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M")


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: int = typer.Argument(..., help="the token's id"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = STORE,
) -> None:
    """Revoke a token on the server (an admin --token): it is refused from then on."""
    if store:
        with local_runtime(ctx, store) as runtime:
            runtime.tokens.revoke(token_id)
        say(f"token {token_id} revoked")
        return
    with connect(server, token) as client:
        done = client.request_object("POST", f"/api/v1/tokens/{token_id}/revoke")
    if done["already_revoked"]:
        say(f"token {token_id} was already revoked")
    else:
        say(f"token {token_id} revoked")
