"""Geometry for the inline SVG pictures: a job's phase timeline, spend bars, the topology.

Pure functions from API-shaped dictionaries to shapes (positions, sizes, a
CSS class and a tooltip); the templates only draw what they are given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

APPROVED = frozenset({"approved", "approve", "accepted", "lgtm", "ok"})
REVISION = frozenset({"revision", "revise", "changes_requested", "request_changes", "rejected"})
PASSED = frozenset({"ok", "passed", "pass", "success", "succeeded", "green"})
FAILED = frozenset({"failed", "fail", "failure", "error", "red"})


@dataclass(frozen=True, slots=True)
class Shape:
    """A rectangle (or a circle when ``r`` is set) with a class, a label and a tooltip."""

    x: float
    y: float
    w: float = 0.0
    h: float = 0.0
    css: str = ""
    label: str = ""
    tip: str = ""
    r: float = 0.0
    href: str = ""
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Picture:
    """Shapes, lines and texts on a canvas of ``width`` by ``height``."""

    width: float
    height: float
    shapes: tuple[Shape, ...] = ()
    lines: tuple[tuple[float, float, float, float, str], ...] = ()
    texts: tuple[tuple[float, float, str, str], ...] = ()


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def phase_css(phase: str, outcome: str | None) -> str:
    """The colour class of one phase: review approved or asked for a revision, verify passed."""
    word = (outcome or "").lower()
    if phase == "review":
        if word in APPROVED:
            return "ph-approved"
        return "ph-revision" if word in REVISION else "ph-review"
    if phase == "verify":
        if word in PASSED:
            return "ph-passed"
        return "ph-failed" if word in FAILED else "ph-verify"
    if phase in ("implementer", "architect", "tool", "round_start"):
        return f"ph-{phase.replace('_', '-')}"
    return "ph-other"


def phase_words(event: Mapping[str, Any]) -> str:
    """One line per phase: what it was, how it ended, what it cost."""
    parts = [str(event["phase"])]
    if event.get("outcome"):
        parts.append(str(event["outcome"]))
    if event.get("name"):
        parts.append(str(event["name"]))
    if event.get("duration_s"):
        parts.append(f"{float(event['duration_s']):.1f} s")
    tokens = int(event.get("input_tokens") or 0) + int(event.get("output_tokens") or 0)
    if tokens:
        parts.append(f"{tokens} tokens")
    if event.get("cost") is not None:
        parts.append(f"${float(event['cost']):.4f}")
    return " · ".join(parts)


def rounds(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events grouped by (task, round), in the order they first appear."""
    grouped: dict[tuple[str, int | None], dict[str, Any]] = {}
    for event in events:
        key = (str(event.get("task_id") or ""), event.get("round"))
        entry = grouped.setdefault(key, {"task_id": key[0], "round": key[1], "phases": []})
        entry["phases"].append(event)
    return list(grouped.values())


ROW_H, ROW_GAP, LEFT, WIDTH = 26.0, 10.0, 120.0, 900.0


def timeline(events: Sequence[Mapping[str, Any]]) -> Picture | None:
    """The job's rounds as rows, each phase a bar from its start to its end."""
    if not events:
        return None
    spans = []
    for event in events:
        end = _at(str(event["at"])).timestamp()
        spans.append((end - float(event.get("duration_s") or 0.0), end))
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans)
    scale = (WIDTH - LEFT - 10) / max(last - first, 1.0)
    shapes: list[Shape] = []
    texts: list[tuple[float, float, str, str]] = []
    index = {id(e): i for i, e in enumerate(events)}
    for row, entry in enumerate(rounds(events)):
        y = 20 + row * (ROW_H + ROW_GAP)
        name = f"round {entry['round']}" if entry["round"] is not None else "no round"
        texts.append((4, y + ROW_H * 0.65, name, "tl-row"))
        for event in entry["phases"]:
            start, end = spans[index[id(event)]]
            x = LEFT + (start - first) * scale
            w = max((end - start) * scale, 6.0)
            css = phase_css(str(event["phase"]), event.get("outcome"))
            text = str(event.get("outcome") or event["phase"]) if w > 60 else ""
            shapes.append(Shape(x, y, w, ROW_H, css, text, phase_words(event)))
    height = 20 + len(rounds(events)) * (ROW_H + ROW_GAP) + 20
    axis = (LEFT, height - 12, WIDTH - 10, height - 12, "tl-axis")
    texts.append((LEFT, height - 1, "0 s", "tl-tick"))
    texts.append((WIDTH - 60, height - 1, f"{last - first:.0f} s", "tl-tick"))
    return Picture(WIDTH, height, tuple(shapes), (axis,), tuple(texts))


def spend_rows(events: Sequence[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    """Tokens and cost summed by ``key`` (``phase`` or ``role``), costliest first."""
    sums: dict[str, dict[str, Any]] = {}
    for event in events:
        name = str(event.get(key) or "(none)")
        row = sums.setdefault(
            name, {"key": name, "input": 0, "output": 0, "cost": 0.0, "unpriced": 0, "calls": 0}
        )
        row["input"] += int(event.get("input_tokens") or 0)
        row["output"] += int(event.get("output_tokens") or 0)
        row["calls"] += 1
        if event.get("cost") is None:
            row["unpriced"] += int(bool(event.get("unpriced")))
        else:
            row["cost"] += float(event["cost"])
    return sorted(sums.values(), key=lambda r: (-r["cost"], r["key"]))


BAR_H, BAR_GAP, BAR_LEFT, BAR_WIDTH = 18.0, 6.0, 200.0, 640.0
#: The longest bar; the labels beside it get the rest of the canvas.
BAR_MOST = BAR_WIDTH - BAR_LEFT - 90
#: A generous width of one character of the 12 px labels: the canvas is sized from it, since
#: an SVG clips whatever is drawn past its edge.
CHAR_W = 7.5


def text_width(text: str) -> float:
    """How wide ``text`` may be drawn in a chart's 12 px labels (an upper estimate)."""
    return len(text) * CHAR_W


def bars(groups: Sequence[Mapping[str, Any]], css: str = "bar") -> Picture:
    """Horizontal bars of cost, one per group, longest for the costliest.

    The canvas widens for long keys on the left and long values on the right,
    so every label is drawn whole.
    """
    top = max((float(g.get("cost") or 0.0) for g in groups), default=0.0)
    keys = [str(group["key"])[:32] for group in groups]
    left = max([BAR_LEFT, *(text_width(key) + 12 for key in keys)])
    shapes: list[Shape] = []
    texts: list[tuple[float, float, str, str]] = []
    right = BAR_WIDTH
    for row, (group, key) in enumerate(zip(groups, keys, strict=True)):
        y = 4 + row * (BAR_H + BAR_GAP)
        cost = float(group.get("cost") or 0.0)
        w = 0.0 if top <= 0 else max(2.0, BAR_MOST * cost / top)
        priced = "unpriced" if group.get("cost") is None else f"${cost:.4f}"
        tip = f"{group['key']}: {priced}, {group.get('calls', 0)} calls"
        if group.get("unpriced"):
            tip += f", {group['unpriced']} unpriced"
        shapes.append(Shape(left, y, w, BAR_H, css, "", tip))
        texts.append((left - 6, y + BAR_H * 0.72, key, "bar-key"))
        value = f"${cost:,.4f}"
        if group.get("unpriced"):
            value = "unpriced" if not cost else f"{value} + {group['unpriced']} unpriced"
        texts.append((left + w + 6, y + BAR_H * 0.72, value, "bar-value"))
        right = max(right, left + w + 6 + text_width(value) + 4)
    height = 8 + len(groups) * (BAR_H + BAR_GAP)
    return Picture(right, max(height, 24.0), tuple(shapes), (), tuple(texts))


COL_W, NODE_H, TASK_W = 320.0, 34.0, 140.0


def age(seconds: float) -> str:
    """``12 s``, ``20 min``, ``3 h``, ``2 d``."""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


@dataclass
class _Drawing:
    """What a picture is drawn from, added to piece by piece."""

    shapes: list[Shape] = field(default_factory=list)
    lines: list[tuple[float, float, float, float, str]] = field(default_factory=list)
    texts: list[tuple[float, float, str, str]] = field(default_factory=list)

    def picture(self, width: float, height: float) -> Picture:
        return Picture(width, height, tuple(self.shapes), tuple(self.lines), tuple(self.texts))


def topology(
    fleets: Sequence[Mapping[str, Any]],
    runners: Sequence[Mapping[str, Any]],
    procs: Sequence[Mapping[str, Any]],
    task_state: Mapping[str, Mapping[str, Any]],
) -> Picture:
    """Fleets as columns of runners; each running task hangs off its runner; processes beside.

    ``task_state`` gives each running task's API form (for its icon and ``interrupted``).
    """
    drawing = _Drawing()
    bottom = 60.0
    names = [str(f["fleet"]) for f in fleets]
    for column, fleet in enumerate(names):
        x = 10 + column * COL_W
        drawing.texts.append((x, 20, f"fleet {fleet}", "topo-fleet"))
        y = 36.0
        for runner in (r for r in runners if r["fleet"] == fleet):
            y = _draw_runner(drawing, runner, task_state, x, y)
        bottom = max(bottom, y)
    bottom = max(bottom, _draw_processes(drawing, procs, 10 + len(names) * COL_W))
    return drawing.picture(20 + (len(names) + 1) * COL_W, bottom + 10)


def _draw_runner(
    drawing: _Drawing,
    runner: Mapping[str, Any],
    task_state: Mapping[str, Mapping[str, Any]],
    x: float,
    y: float,
) -> float:
    """One runner at ``(x, y)`` with its running tasks beside it; where the next one goes."""
    alive = bool(runner["alive"])
    name = runner.get("name") or runner["id"]
    tip = (
        f"{name} on {runner['host']} ({'alive' if alive else 'not alive'}), last heartbeat "
        f"{age(runner['heartbeat_age_s'])} ago, {runner['running']}/"
        f"{runner['capacity']} running"
    )
    kind = "runner alive" if alive else "runner dead"
    data = {"runner-id": str(runner["id"])}
    drawing.shapes.append(Shape(x, y, 150, NODE_H, kind, str(name)[:20], tip, data=data))
    beat = f"♥ {age(runner['heartbeat_age_s'])} ago"
    drawing.texts.append((x + 6, y + NODE_H + 11, beat, "topo-beat"))
    for n, task in enumerate(runner["tasks"]):
        ty = y + n * (NODE_H * 0.8)
        drawing.lines.append((x + 150, y + NODE_H / 2, x + 170, ty + NODE_H * 0.35, "topo-link"))
        state = {**task, **task_state.get(str(task["id"]), {}), "status": "running"}
        drawing.shapes.append(_task_shape(task, state, x + 170, ty))
    return y + max(NODE_H + 22, len(runner["tasks"]) * NODE_H * 0.8 + 22)


def _task_shape(task: Mapping[str, Any], state: Mapping[str, Any], x: float, y: float) -> Shape:
    """A running task, linking to its job; marked when a restart interrupted it."""
    job = str(task["job_id"])
    tip = f"task {task['id']} of job {job}: {task.get('step') or 'running'}"
    data = {"task": str(task["id"]), "interrupted": "1" if state.get("interrupted") else ""}
    return Shape(x, y, TASK_W, NODE_H * 0.7, "task", job, tip, href=f"/web/jobs/{job}", data=data)


def _draw_processes(drawing: _Drawing, procs: Sequence[Mapping[str, Any]], x: float) -> float:
    """The latest process runs as a column at ``x``; where the column ends."""
    drawing.texts.append((x, 20, "process runs", "topo-fleet"))
    y = 36.0
    for run in procs[:20]:
        status = str(run.get("effective_status") or run.get("status"))
        label = str(run.get("name") or run["id"])[:24]
        href = f"/web/procs/{run['id']}"
        kind = f"proc proc-{status}"
        tip = f"{run['id']}: {status}"
        drawing.shapes.append(Shape(x, y, 180, NODE_H * 0.8, kind, label, tip, href=href))
        y += NODE_H
    return y


def dial(value: float) -> dict[str, float]:
    """An arc for a health dial: ``value`` from 0 (empty) to 1 (full), as an SVG path's end."""
    import math

    value = min(max(value, 0.0), 1.0)
    angle = math.pi * (1 - value)
    return {"x": 40 + 30 * math.cos(angle), "y": 44 - 30 * math.sin(angle), "large": 0.0}
