"""``watchkeeper token``: API tokens in the local store."""

from __future__ import annotations

import typer

from watchkeeper.cli.common import console, local_runtime

app = typer.Typer(help="API tokens.", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    role: str = typer.Option(..., "--role", "-r", help="admin, reporter or viewer"),
    name: str = typer.Option("cli", "--name", help="a label to recognise it by"),
) -> None:
    """Create a token; its secret is printed once."""
    from watchkeeper.store.tokens import parse_role

    runtime = local_runtime(ctx)
    try:
        info, secret = runtime.store.tokens.create(parse_role(role), name, runtime.clock())
    finally:
        runtime.close()
    console.print(f"token {info.id} ({info.role.value}, {info.name}):")
    console.print(secret, highlight=False)


@app.command("list")
def list_tokens(ctx: typer.Context) -> None:
    """List tokens (never their secrets)."""
    from rich.table import Table

    runtime = local_runtime(ctx)
    try:
        tokens = runtime.store.tokens.list()
    finally:
        runtime.close()
    table = Table("id", "name", "role", "created", "revoked")
    for t in tokens:
        table.add_row(
            str(t.id),
            t.name,
            t.role.value,
            t.created_at.strftime("%Y-%m-%d %H:%M"),
            t.revoked_at.strftime("%Y-%m-%d %H:%M") if t.revoked_at else "",
        )
    console.print(table)


@app.command("revoke")
def revoke(ctx: typer.Context, token_id: int = typer.Argument(..., help="the token's id")) -> None:
    """Revoke a token."""
    runtime = local_runtime(ctx)
    try:
        runtime.store.tokens.revoke(token_id, runtime.clock())
    finally:
        runtime.close()
    console.print(f"token {token_id} revoked")
