"""Commands for timelines: ``record``, ``verify-record`` and ``spend``.

Each asks a watchkeeper server (``--server`` or ``WATCHKEEPER_URL``,
``--token`` or ``WATCHKEEPER_TOKEN``). ``verify-record`` sends the record file
to the server, which checks it with its record key; with ``--store PATH`` it
checks locally with the key kept in that data folder (or ``[records]
key_env``). Exit status 0 when it is valid, 1 with the reason when it is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from watchkeeper.cli.app.common import NoStore, pointed_at, settings
from watchkeeper.cli.app.options import (
    JSON,
    SERVER,
    TOKEN,
    connect,
    print_json,
    print_table,
    say,
)
from watchkeeper.cli.console import console

if TYPE_CHECKING:
    from watchkeeper.config import Settings


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
    server: str | None = SERVER,
    token: str | None = TOKEN,
    store: str | None = typer.Option(
        None,
        "--store",
        help="check here with the record key of this data folder instead of asking a server",
    ),
    public_key: str | None = typer.Option(
        None,
        "--public-key",
        help="check here, offline, with this public key (hex, or a file holding it) as "
        "GET /api/v1/records/key gives it",
    ),
) -> None:
    """Check a record's signatures: exit 0 valid, 1 invalid.

    By default the server checks it with its key, and also that the job's timeline still
    says what the record does. --public-key checks it here, offline.
    """
    try:
        data = file.read_bytes()
    except OSError as exc:
        say(f"invalid: cannot read {file}: {exc.strerror}", stderr=True)
        raise typer.Exit(1) from None
    if public_key or store:
        from watchkeeper.timeline import record as records

        if public_key:
            found = records.verify(data, _public_key(public_key))
        else:
            keys = records.load_keys(_key_settings(ctx, store or ""))
            found = records.verify(data, keys.public_key, keys.legacy)
        valid, reason = found.valid, found.reason
    else:
        with connect(server, token) as client:
            answer = client.request_object(
                "POST",
                "/api/v1/records/verify",
                content=data,
                headers={"Content-Type": "application/json"},
            )
        valid, reason = bool(answer["valid"]), str(answer["reason"])
    if not valid:
        say(f"invalid: {reason}", stderr=True)
        raise typer.Exit(1)
    say(reason)


def _key_settings(ctx: typer.Context, store: str) -> Settings:
    """The configuration pointed at ``--store``, whose record key must exist: a key made now
    would call every record invalid."""
    from watchkeeper.timeline.record import SEED_FILE

    loaded = pointed_at(settings(ctx), store)
    key = loaded.data_dir / SEED_FILE
    if not loaded.records.key_env and not key.is_file():
        raise NoStore(
            f"no record key at {key}: name the data folder of the server that signed the record "
            "with --store PATH, or set [records] key_env"
        )
    return loaded


def _public_key(given: str) -> bytes:
    """The 32 bytes of ``--public-key``: hex, or a file holding the hex (or the key's JSON)."""
    from watchkeeper.errors import InvalidInput

    text = given.strip()
    path = Path(text)
    if len(text) != 64 and path.is_file():
        text = path.read_text(encoding="utf-8").strip()
        if text.startswith("{"):
            text = str(json.loads(text).get("public_key", ""))
    from watchkeeper.timeline.record import key_bytes

    key = key_bytes(text)
    if key is None:
        raise InvalidInput(
            "--public-key must be the 64 hex digits GET /api/v1/records/key gives, or a file "
            "holding them",
            "public_key",
        )
    return key


def spend(
    by: str = typer.Option("model", "--by", help="org, job, role, model, provider or day"),
    org: str | None = typer.Option(None, "--org"),
    job_id: str | None = typer.Option(None, "--job"),
    since: str | None = typer.Option(
        None, "--since", help="only calls from then on: a date (that whole UTC day) or a time"
    ),
    until: str | None = typer.Option(
        None, "--until", help="only calls until then: a date (that day counts) or a time"
    ),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    as_json: bool = JSON,
) -> None:
    """What model calls cost, grouped, with totals and how many calls were unpriced."""
    with connect(server, token) as client:
        body = client.timeline.spend(by, org=org, job_id=job_id, since=since, until=until)
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
        "unpriced" if group["cost"] is None else f"{group['cost']:.6f}",
        str(group["calls"]),
        str(group["unpriced"]),
        str(group["input_tokens"]),
        str(group["output_tokens"]),
    ]
