"""``watchkeeper replicas``: the servers sharing one database, which are alive, which leads.

It asks a server over its API (``--server`` / ``WATCHKEEPER_URL``, ``--token``
/ ``WATCHKEEPER_TOKEN``, any role); behind a load balancer any replica gives
the same answer, read from the shared lease and heartbeat rows.
"""

from __future__ import annotations

from typing import Any

from watchkeeper.cli.app.options import JSON, SERVER, TOKEN, connect, print_json, print_table, say

_COLUMNS = ("replica", "host", "pid", "version", "started", "last beat", "alive", "role")


def replicas(server: str | None = SERVER, token: str | None = TOKEN, as_json: bool = JSON) -> None:
    """Replicas of the server: alive or not, which one leads, and the lease epoch."""
    with connect(server, token) as client:
        body = client.replicas()
    if as_json:
        print_json(body)
        return
    rows = body["replicas"]
    print_table(f"Replicas ({len(rows)})", _COLUMNS, map(_row, rows))
    if body["leader"] is None:
        # Nothing sweeps or routes notices until some replica takes the lease.
        say("leader: none (no replica holds a live lease)")
    else:
        say(f"leader: {body['leader']} (epoch {body['epoch']})")
    say(f"answered by: {body['answered_by']}")


def _row(item: dict[str, Any]) -> tuple[str, ...]:
    return (
        item["name"],
        item["host"],
        str(item["pid"]),
        item["version"],
        item["started_at"],
        f"{item['beat_age_s']:.0f} s ago",
        "yes" if item["alive"] else "no",
        "leads" if item["leader"] else "follows",
    )
