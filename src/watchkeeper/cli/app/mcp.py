"""``watchkeeper mcp``: watchkeeper's tools for an agent, over MCP on stdin and stdout."""

from __future__ import annotations

from watchkeeper.cli.app.options import SERVER, TOKEN, server_url


def mcp(server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Serve watchkeeper's tools to the agent that starts this, over MCP on stdin and stdout.

    Add it to an agent client's MCP servers as the command `watchkeeper` with the
    argument `mcp`, and WATCHKEEPER_URL and WATCHKEEPER_TOKEN in its environment (see
    docs/mcp.md). Each tool calls the server's API with that token; when no server
    answers, each call says so. Stdout carries the protocol alone.
    """
    from watchkeeper.mcp.stdio import serve

    url, source = server_url(server)
    serve(url, source, token)
