"""The host's programs as the API, the command line and the dashboard show them.

:func:`status` is ``GET /api/v1/programs``; :func:`program` one program with its
history; :func:`tree` the same programs as a supervision tree, in the shape of
``GET /api/v1/supervision``'s trees (docs/supervision.md), so the supervision
canvas draws them beside the server's own loops.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psutil

from watchkeeper.clock import rfc3339
from watchkeeper.programs.host import ProgramHost
from watchkeeper.programs.records import run_id_of
from watchkeeper.programs.state import NOT_WANTED, GroupRun, ProgramState
from watchkeeper.redact import redact
from watchkeeper.supervise import ChildInfo

#: The tree's id, and the prefix of every node in it (``programs/crawl/crawler``).
TREE = "programs"


def status(host: ProgramHost) -> dict[str, Any]:
    """Every program of this host, its groups, its host checks, and the programs elsewhere."""
    return {
        "host": host.host,
        "running": host.running,
        "programs": [_program(host, state) for state in host.programs.values()],
        "groups": [_group(host, name) for name in _group_names(host)],
        "host_checks": _host_checks(host),
        "elsewhere": [{"name": n, "host": h} for n, h in sorted(host.elsewhere.items())],
    }


def program(host: ProgramHost, name: str) -> dict[str, Any]:
    """One program with its history (oldest first); :class:`NotFound` for another name."""
    _, state = host.find(name)
    if state is None:
        return _group(host, name)
    shown = _program(host, state)
    shown["history"] = [
        {"at": rfc3339(m.at), "event": m.event, "text": m.text} for m in state.history
    ]
    return shown


def _group_names(host: ProgramHost) -> list[str]:
    return [g.name for g in host.plans]


def _info(host: ProgramHost, state: ProgramState) -> tuple[GroupRun | None, ChildInfo | None]:
    group = host.groups.get(state.plan.group)
    if group is None:
        return None, None
    return group, next((c for c in group.supervisor.children() if c.name == state.name), None)


def _state(group: GroupRun | None, info: ChildInfo | None) -> str:
    """The program's state in words: running, starting, restarting, paused, stopped, exited,
    failed or gave_up."""
    if group is None or info is None:
        return "stopped"
    raw = info.state
    if raw in ("running", "starting"):
        return raw
    if raw == "restart_pending":
        # Never ran yet: waiting its turn in the group's first start.
        return "restarting" if info.last_exit is not None else "starting"
    if raw == "held":
        return "stopped" if info.held == NOT_WANTED else "paused"
    if group.state == "gave_up":
        return "gave_up"
    last = info.last_exit or ""
    if raw == "idle" or last.startswith("shutdown") or not last:
        return "stopped"
    return "exited" if last.startswith("normal") else "failed"


def _program(host: ProgramHost, state: ProgramState) -> dict[str, Any]:
    group, info = _info(host, state)
    config = state.plan.config
    now = host.clock()
    shown_state = _state(group, info)
    started = info.started_at if info is not None else None
    due = info.restart_at if info is not None else None
    return {
        "name": state.name,
        "id": node_id(state.plan.group, state.name, state.plan.grouped),
        "group": state.plan.group if state.plan.grouped else None,
        "host": host.host,
        "run_id": run_id_of(state.name, host.host),
        "description": config.description,
        "state": shown_state,
        "wanted": state.wanted,
        "pid": _leader(info.pid if info is not None else None, config.contain == "tree"),
        "started_at": rfc3339(host.wall(started)) if started is not None else None,
        "uptime_s": round(host.sv_clock.now() - started, 3) if started is not None else None,
        "restarts": state.restarts,
        "last_exit": info.last_exit if info is not None else None,
        "backoff": None
        if due is None
        else {
            "restart_at": rfc3339(now + timedelta(seconds=due - host.sv_clock.now())),
            "restart_in_s": round(max(0.0, due - host.sv_clock.now()), 3),
        },
        "paused": info.held if shown_state == "paused" and info is not None else None,
        "health": _health(state),
        "log": {"path": str(state.log.path), "size": _size(state)},
        "command": [redact(part) for part in config.command],
        "directory": str(config.directory) if config.directory is not None else None,
        "restart": config.restart,
        "autostart": config.autostart,
        "start_s": config.start_s,
        "stop_signal": config.stop_signal,
        "stop_timeout_s": config.stop_timeout_s,
        "exit_codes": list(config.exit_codes),
        "contain": config.contain,
        "notify": _notify(host, state.name),
    }


def _notify(host: ProgramHost, name: str) -> dict[str, str]:
    """Where the program's notices go (``ops``: the ops channels), and who chose that."""
    place, set_by = host.notify_of(name)
    return {"to": place, "set_by": set_by}


def _leader(pid: int | None, kept: bool) -> int | None:
    """The program's own pid: under a keeper, the keeper's eldest child."""
    if pid is None or not kept:
        return pid
    try:
        children = [psutil.Process(child) for child in _children_of(pid)]
        return min(children, key=lambda p: p.create_time()).pid if children else None
    except psutil.Error:
        return None


def _children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid``.

    Read from the kernel's list of that process's children: psutil's ``children()``
    scans every process of the host, which with a hundred programs read on every view
    of them kept half a core busy.
    """
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listed:
            return [int(child) for child in listed.read().split()]
    except FileNotFoundError:
        return [child.pid for child in psutil.Process(pid).children()]


def _size(state: ProgramState) -> int:
    try:
        return state.log.path.stat().st_size
    except OSError:
        return 0


def _health(state: ProgramState) -> list[dict[str, str]]:
    return [
        {"name": name, "status": status, "detail": detail}
        for name, (status, detail) in sorted(state.health.items())
    ]


def _group(host: ProgramHost, name: str) -> dict[str, Any]:
    group_plan = next(g for g in host.plans if g.name == name)
    group = host.groups.get(name)
    stats = group.supervisor.statistics() if group is not None else None
    before = group.restarts_before if group is not None else 0
    return {
        "name": name,
        "declared": group_plan.declared,
        "strategy": group_plan.strategy.value,
        "state": group.state if group is not None else "stopped",
        "intensity": group_plan.intensity.model_dump(),
        "backoff": group_plan.backoff.model_dump(),
        "restarts": before + (stats.restarts if stats is not None else 0),
        "restarts_in_window": stats.restarts_in_window if stats is not None else 0,
        "gave_up_at": rfc3339(group.gave_up_at) if group is not None else None,
        "crash_loop": group.culprit if group is not None else None,
        "programs": [p.name for p in group_plan.programs],
        "notify": group_plan.notify,
    }


def _host_checks(host: ProgramHost) -> list[dict[str, Any]]:
    return [
        {
            "name": gate.name,
            "kind": gate.config.kind,
            "status": gate.status.value,
            "detail": gate.detail,
            "pausing": gate.closed,
            "pauses": sorted(gate.pauses),
            "checked_at": rfc3339(host.wall(gate.checked_at)) if gate.checked_at else None,
        }
        for gate in host.gates.gates
    ]


def node_id(group: str, name: str, grouped: bool) -> str:
    """A program's id in the supervision tree: ``programs/GROUP/NAME`` or ``programs/NAME``."""
    return f"{TREE}/{group}/{name}" if grouped else f"{TREE}/{name}"


def named_by(node: str) -> str | None:
    """The program or group a node id names (``programs/crawl/crawler`` names ``crawler``,
    ``programs/crawl`` the group ``crawl``), or ``None`` for a node of another tree."""
    tree, _, rest = node.partition("/")
    if tree != TREE or not rest:
        return None
    return rest.rsplit("/", 1)[-1]


def tree(host: ProgramHost) -> dict[str, Any] | None:
    """The programs as one supervision tree (``None`` when this host runs none): groups are
    nested supervisors, a program alone hangs from the root, as docs/supervision.md draws."""
    if not host.plans:
        return None
    shown = status(host)
    programs = {p["name"]: p for p in shown["programs"]}
    children: list[dict[str, Any]] = []
    for group in shown["groups"]:
        members = [_node(programs[name]) for name in group["programs"]]
        if not group["declared"]:
            children += members
            continue
        children.append(
            {
                "id": f"{TREE}/{group['name']}",
                "name": group["name"],
                "title": f"{group['strategy'].replace('_', '-')} group of {len(members)}",
                "kind": "supervisor",
                "state": group["state"],
                "restarts": group["restarts"],
                "last_exit": None,
                "strategy": group["strategy"],
                "intensity": _intensity(group["intensity"]),
                "href": None,
                "pid": None,
                "detail": f"crash loop of {group['crash_loop']}" if group["crash_loop"] else None,
                "notify": group["notify"],
                "children": members,
            }
        )
    return {
        "id": TREE,
        "name": f"programs on {host.host}",
        "kind": "supervisor",
        "strategy": "one_for_one",
        "state": "running" if host.running else "stopped",
        "restarts": sum(p["restarts"] for p in shown["programs"]),
        "intensity": None,
        "children": children,
    }


def health_rows(host: ProgramHost) -> list[dict[str, Any]]:
    """Each program's health checks and each host check, as the supervision picture lists
    checks (``node`` is what the check is about)."""
    rows = [
        {
            "name": f"{state.name} {check}",
            "status": status_,
            "detail": detail,
            "node": node_id(state.plan.group, state.name, state.plan.grouped),
        }
        for state in host.programs.values()
        for check, (status_, detail) in sorted(state.health.items())
    ]
    rows += [
        {
            "name": f"host check {gate.name}",
            "status": gate.status.value,
            "detail": gate.detail,
            "node": TREE,
        }
        for gate in host.gates.gates
    ]
    return rows


def _intensity(limit: dict[str, Any]) -> dict[str, Any]:
    return {"max_restarts": limit["restarts"], "period_s": limit["within_s"]}


def _node(program: dict[str, Any]) -> dict[str, Any]:
    backoff, paused = program["backoff"], program["paused"]
    detail = (
        f"restarting in {backoff['restart_in_s']:g} s"
        if backoff is not None
        else f"paused: {paused}"
        if paused
        else None
    )
    return {
        "id": program["id"],
        "name": program["name"],
        "title": program["description"],
        "kind": "worker",
        "state": program["state"],
        "restarts": program["restarts"],
        "last_exit": program["last_exit"],
        "strategy": None,
        "intensity": None,
        "href": f"/web/programs/{program['name']}",
        "pid": program["pid"],
        "detail": detail,
        "notify": program["notify"],
        "children": [],
    }
