"""The one MCP server both transports serve: every tool and resource, over a :class:`Link`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from watchkeeper import __version__
from watchkeeper.mcp import resources, tools_procs, tools_reports, tools_work
from watchkeeper.mcp.link import Link

INSTRUCTIONS = (
    "watchkeeper supervises long-running work. Start long commands with run (detached), "
    "then park until the run ends instead of polling: the server wakes your session once, "
    "with the result. Report your own run with report_start, report_progress, "
    "report_finish or report_fail. runs and incidents say what needs attention."
)


def build(link: Link) -> MCPServer:
    """An MCP server whose tools call watchkeeper's API through ``link``."""
    server = MCPServer(
        name="watchkeeper",
        version=__version__,
        instructions=INSTRUCTIONS,
        # Its resource templates are its own; it serves no subscriptions.
        subscriptions=False,
    )
    for part in (tools_procs, tools_reports, tools_work, resources):
        part.add(server, link)
    return server
