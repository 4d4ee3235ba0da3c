"""watchkeeper as a Model Context Protocol server, for agents that use it as a tool.

One definition of each tool (:mod:`watchkeeper.mcp.build`) serves two transports:
``watchkeeper mcp`` speaks MCP on its standard input and output to the agent that
started it and calls the configured server's API through the SDK
(:mod:`watchkeeper.mcp.stdio`); ``serve`` answers MCP over streamable HTTP at
``/mcp`` and calls its own API in process with the caller's token
(:mod:`watchkeeper.mcp.in_process`). Either way every call is an API call: the
same validation, the same role checks, the same answers.

Nothing here is imported by ``import watchkeeper``: the MCP SDK loads only when a
server is built.
"""
