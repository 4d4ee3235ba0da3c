"""``watchkeeper show KIND/RUN``: is this run OK? One run, as the server judges it now."""

from __future__ import annotations

from typing import Any

import typer

from watchkeeper.cli.app.options import JSON, SERVER, TOKEN, connect, print_json, say


def show(
    run: str = typer.Argument(..., help="the run as KIND/RUN, e.g. crawl/r-42 (see `runs`)"),
    as_json: bool = JSON,
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Status, verdict and since when, incident, decision and card of one run."""
    kind, run_id = _split(run)
    with connect(server, token) as client:
        body = client.get_run(kind, run_id)
    if as_json:
        print_json(body)
        return
    for label, value in lines(body):
        say(f"{label + ':':<10} {value}")


def _split(run: str) -> tuple[str, str]:
    kind, _, run_id = run.partition("/")
    if not kind or not run_id:
        from watchkeeper.errors import InvalidInput

        raise InvalidInput(
            f"{run!r}: write KIND/RUN, e.g. crawl/r-42 (`watchkeeper runs` lists them)"
        )
    return kind, run_id


def lines(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The labelled lines ``show`` prints for one run's API answer."""
    verdict = body.get("verdict")
    decision = body.get("decision")
    card = body.get("card")
    incident = body.get("incident_id")
    return [
        ("run", f"{body['kind']}/{body['run_id']}  {body.get('title') or ''}".rstrip()),
        ("status", str(body["status"])),
        ("step", _step(body)),
        ("progress", body.get("progress_at") or "-"),
        (
            "verdict",
            "ok: nothing wrong"
            if not verdict
            else f"{verdict['condition']} since {verdict['since']}: {verdict['reason']}",
        ),
        ("incident", "none" if incident is None else str(incident)),
        (
            "decision",
            "none"
            if not decision
            else f"{decision['action']} by {decision['by']} via {decision['via']}"
            f" at {decision['at']}",
        ),
        ("card", _card(card, incident)),
    ]


def _step(body: dict[str, Any]) -> str:
    """``running the tests · 12 of 40 · budget 30m, expected 10m · said 3 times in a row``."""
    parts = [body.get("step") or "-"]
    done, total = body.get("done"), body.get("total")
    if done is not None or total is not None:
        parts.append(f"{'?' if done is None else done} of {'?' if total is None else total}")
    times = [
        f"{name} {_duration(body[key])}"
        for name, key in (("budget", "step_budget_s"), ("expected", "step_expected_s"))
        if body.get(key) is not None
    ]
    if times:
        parts.append(", ".join(times))
    if (body.get("repeats") or 0) >= 2:
        parts.append(f"said {body['repeats']} times in a row")
    return " · ".join(parts)


def _duration(seconds: float) -> str:
    """``90s``, ``30m``, ``2h30m``: as a step's budget is given on the command line."""
    whole = round(seconds)
    if whole != seconds or whole < 60:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)


def _card(card: dict[str, Any] | None, incident: int | None) -> str:
    if card is None:
        return "none" if incident is None else "none (no chat is routed this incident)"
    text = f"{card['state']} on {card['channel']}"
    if card.get("error"):
        text += f" ({card['error']})"
    return text
