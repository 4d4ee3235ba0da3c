"""The canvas's edge from a program to a supervisor: where the program's notices go.

The supervisor stands for a place: a program group for its ``notify`` (the ops channels
when it has none), a tree's root (the server's, or the programs') for the ops channels.
The change is the running configuration's, as a strategy switched on the canvas is.
"""

from __future__ import annotations

from watchkeeper.errors import NotFound
from watchkeeper.programs import view
from watchkeeper.server.supervision import TREE, ServerSupervision

#: The roots that stand for the ops channels.
OPS_ROOTS = frozenset({TREE, view.TREE})


async def route_notices(supervision: ServerSupervision, program: str, node: str) -> str:
    """Send ``program``'s notices where the supervisor ``node`` stands for; the answer says
    where they go now and that watchkeeper.toml is unchanged."""
    group = None
    if node not in OPS_ROOTS:
        group = node.removeprefix(f"{view.TREE}/")
        if group == node or "/" in group:
            raise NotFound(
                f"no supervisor {node!r} to route to: drop the edge on the server's tree "
                f"({TREE}) or the programs' ({view.TREE}) for the ops channels, or on a "
                f"program group ({view.TREE}/GROUP)"
            )
    return await supervision.programs.route_to(program, group)
