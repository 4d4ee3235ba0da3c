"""Commands for timelines: ``record``, ``verify-record`` and ``spend``.

``record`` and ``spend`` ask a watchkeeper server (``--server`` or
``WATCHKEEPER_URL``, ``--token`` or ``WATCHKEEPER_TOKEN``). ``verify-record``
checks a record file locally with this configuration's record key
(``[records] key_env``, or ``DATA_DIR/record.key`` of the server that signed
it): exit status 0 when it is valid, 1 with the reason when it is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from watchkeeper.cli.common import console, settings
from watchkeeper.cli.options import JSON, SERVER, TOKEN, connect, print_json, print_table, say


def record(
    job_id: str = typer.Argument(..., help="a finished job's id"),
    out: Path | None = typer.Option(None, "--out", "-o", help="write the record to this file"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Fetch a finished job's signed execution record (JSON)."""
    with connect(server, token) as client:
        body = client.timeline.record(job_id)
    text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    if out is None:
        console.print_json(text)
        return
    out.write_text(text, encoding="utf-8")
    rounds = len(body.get("rounds", []))
    say(f"wrote the record of job {job_id} ({rounds} round(s)) to {out}")


def verify_record(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="a record written by `watchkeeper record --out`"),
) -> None:
    """Check a record's signature with this server's record key: exit 0 valid, 1 invalid."""
    from watchkeeper.timeline import record as records

    try:
        data = file.read_bytes()
    except OSError as exc:
        say(f"invalid: cannot read {file}: {exc.strerror}", stderr=True)
        raise typer.Exit(1) from None
    verdict = records.verify(data, records.load_key(settings(ctx)))
    if not verdict.valid:
        say(f"invalid: {verdict.reason}", stderr=True)
        raise typer.Exit(1)
    say(verdict.reason)


def spend(
    by: str = typer.Option("model", "--by", help="org, job, role, model, provider or day"),
    org: str | None = typer.Option(None, "--org"),
    job_id: str | None = typer.Option(None, "--job"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    as_json: bool = JSON,
) -> None:
    """What model calls cost, grouped, with totals and how many calls were unpriced."""
    with connect(server, token) as client:
        body = client.timeline.spend(by, org=org, job_id=job_id)
    if as_json:
        print_json(body)
        return
    print_table(
        f"Spend by {by}",
        (by, "cost (USD)", "calls", "unpriced", "input", "output"),
        map(_cells, [*body["groups"], {**body["totals"], "key": "total"}]),
    )
    if body["totals"]["unpriced"]:
        say(f"{body['totals']['unpriced']} call(s) unpriced: the total is a floor")


def _cells(group: dict[str, Any]) -> list[str]:
    return [
        str(group["key"] if group["key"] is not None else "(none)"),
        f"{group['cost']:.6f}",
        str(group["calls"]),
        str(group["unpriced"]),
        str(group["input_tokens"]),
        str(group["output_tokens"]),
    ]
