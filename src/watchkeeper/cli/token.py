"""``watchkeeper token``: API tokens in the local store."""

from __future__ import annotations

from datetime import datetime

import typer

from watchkeeper.cli.common import local_runtime
from watchkeeper.cli.options import print_table, say

app = typer.Typer(help="API tokens.", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    role: str = typer.Option(..., "--role", "-r", help="admin, reporter or viewer"),
    name: str = typer.Option("cli", "--name", help="a label to recognise it by"),
) -> None:
    """Create a token; its secret is printed once."""
    with local_runtime(ctx) as runtime:
        info, secret = runtime.tokens.create(role, name)
    say(f"token {info.id} ({info.role.value}, {info.name}):")
    say(secret)


@app.command("list")
def list_tokens(ctx: typer.Context) -> None:
    """List tokens (never their secrets)."""
    with local_runtime(ctx) as runtime:
        tokens = runtime.tokens.list()
    rows = [
        [str(t.id), t.name, t.role.value, _minute(t.created_at), _minute(t.revoked_at)]
        for t in tokens
    ]
    print_table("Tokens", ("id", "name", "role", "created", "revoked"), rows)


def _minute(at: datetime | None) -> str:
    return "" if at is None else at.strftime("%Y-%m-%d %H:%M")


@app.command("revoke")
def revoke(ctx: typer.Context, token_id: int = typer.Argument(..., help="the token's id")) -> None:
    """Revoke a token."""
    with local_runtime(ctx) as runtime:
        runtime.tokens.revoke(token_id)
    say(f"token {token_id} revoked")
