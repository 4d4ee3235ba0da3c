"""Every secret shape, through every input that is stored or shown, leaves through no exit.

The shapes are the table of ``tests/unit/test_redact.py``. Each input takes all of them in
one pass (as many items as its size limit needs): a push run's title, step, failure reason
and detail; a job's title and its argv; a task's output (its tail and its shipped pieces);
timeline details and rationales; a process's output. One server serves the module; what it
stored and what each exit shows is read once, then checked shape by shape: the API (JSON and
the CSV export), the command line, the dashboard's pages, the cards a fake Telegram received,
the server's log, and the stored rows (a task's argv alone is stored as given: a runner
needs it to act on).
"""

from __future__ import annotations

import asyncio
import html
import io
import logging
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from watchkeeper import logsafety
from watchkeeper.clock import ManualClock
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.deliverer import Deliverer
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import T0, make_settings
from ..support.cli import wk
from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for
from ..unit.test_redact import SAMPLES
from .fakes import telegram as tg
from .helpers import sweep
from .test_no_secret_leaks import _login

CHAT = -1001234567890
ORIGIN = {"platform": "telegram", "chat_id": str(CHAT)}
MASKS = ("[redacted]", "[email]", "[card]")
#: The sample texts, one a piece: the text around each secret stays as it was.
PIECES = [before + secret + after for _name, before, secret, after in SAMPLES]
#: What an exit shows that is no secret: the text around the secrets, and the chat's id.
KEPT = " ".join([str(CHAT), *(before + " " + after for _name, before, _secret, after in SAMPLES)])


def batches(limit: int) -> list[str]:
    """Every sample, packed into as few texts of at most ``limit`` characters as hold them."""
    packed: list[str] = []
    for piece in PIECES:
        if packed and len(packed[-1]) + 3 + len(piece) <= limit:
            packed[-1] += " | " + piece
        else:
            packed.append(piece)
    assert all(len(text) <= limit for text in packed)
    return packed


def raw_runs(text: str) -> dict[str, list[str]]:
    """For each shape, where ``text`` shows a run of 8 characters of its secret (what is
    around the first such place)."""
    found: dict[str, list[str]] = {}
    for name, _before, secret, _after in SAMPLES:
        runs = [secret[i : i + 8] for i in range(max(1, len(secret) - 7))]
        shown = [run for run in runs if run in text and run not in KEPT]
        if shown:
            at = text.index(shown[0])
            found[name] = [shown[0], text[max(0, at - 40) : at + 48]]
    return found


def _strings(value: Any) -> Iterator[str]:
    """Every text inside a JSON answer, unescaped."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass
class World:
    """What each exit showed, by exit name, and what the store kept."""

    exits: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    stored_argv: list[str] = field(default_factory=list)


# -- the inputs ----------------------------------------------------------------------------


def _push_runs(api: httpx.Client) -> list[str]:
    detail = "\n".join(PIECES)
    ids = []
    for i, text in enumerate(batches(480)):
        run_id = f"leak-{i}"
        started = api.post(
            "/api/v1/runs",
            json={
                "kind": "crawl",
                "run_id": run_id,
                "title": text,
                "effects": "none",
                "origin": ORIGIN,
            },
        )
        assert started.status_code == 201, started.text
        moved = api.post(f"/api/v1/runs/crawl/{run_id}/progress", json={"step": text})
        assert moved.status_code == 200, moved.text
        failed = api.post(
            f"/api/v1/runs/crawl/{run_id}/fail", json={"reason": text, "detail": detail}
        )
        assert failed.status_code == 200, failed.text
        ids.append(run_id)
    return ids


def _jobs(api: httpx.Client) -> tuple[list[str], str]:
    """One job per title batch, each running every piece as its argv; the first one's task,
    leased by a runner that sends its output raw (a runner may not redact)."""
    ids = []
    for text in batches(480):
        job = api.post(
            "/api/v1/jobs",
            json={
                "title": text,
                "org": "acme",
                "fleet": "leaks",
                "payload": {"argv": ["echo", *PIECES]},
            },
        )
        assert job.status_code == 201, job.text
        ids.append(job.json()["id"])
    runner = api.post(
        "/api/v1/runners", json={"fleet": "leaks", "capacity": 1, "host": "h1", "pid": 4242}
    )
    assert runner.status_code == 201, runner.text
    leased = api.post(f"/api/v1/runners/{runner.json()['id']}/lease", json={"max": 1})
    (task,) = leased.json()["tasks"]
    output = "\n".join(PIECES) + "\n"
    shipped = api.post(
        f"/api/v1/tasks/{task['id']}/output/chunks",
        json={
            "lease_token": task["lease_token"],
            "offset": 0,
            "end": len(output.encode()),
            "output": output,
            "final": True,
        },
    )
    assert shipped.status_code == 200, shipped.text
    tail = api.post(
        f"/api/v1/tasks/{task['id']}/output",
        json={"lease_token": task["lease_token"], "output": output},
    )
    assert tail.status_code == 200, tail.text
    events = [
        {
            "phase": "tool",
            "task_id": task["id"],
            "job_id": task["job_id"],
            "org": "acme",
            "name": "shell",
            "detail": text,
            "rationale": text,
        }
        for text in batches(900)
    ]
    assert api.post("/api/v1/events/batch", json={"events": events}).status_code == 201
    done = api.post(
        f"/api/v1/tasks/{task['id']}/fail",
        json={"lease_token": task["lease_token"], "reason": "exit 1"},
    )
    assert done.status_code == 200, done.text
    return ids, task["id"]


def _process(runtime: Runtime, tmp: Path) -> str:
    script = tmp / "prints.py"
    script.write_text("import sys\nsys.stdout.write(open(sys.argv[1]).read())\n")
    (tmp / "printed").write_text("\n".join(PIECES) + "\n")
    engine = ProcEngine.from_settings(runtime.settings, runtime.store, runtime.clock)
    request = LaunchRequest(argv=(sys.executable, str(script), str(tmp / "printed")), detach=True)
    run_id = engine.start(request).run.run_id
    wait_for(lambda: engine.refresh(run_id).status.ended, what="the process's end", timeout=60)
    return run_id


def _deliver(runtime: Runtime, clock: ManualClock) -> None:
    """Route what happened and send the cards to the fake Telegram."""

    async def go() -> None:
        channel = TelegramChannel(runtime.settings.telegram)
        try:
            notifier = runtime.build_notifier({"telegram": channel})
            notifier.deliverer = Deliverer(
                runtime.store, notifier.channels, clock, claimer=notifier.deliverer.claimer
            )
            notifier.route(clock())
            await notifier.deliver_due()
        finally:
            await channel.aclose()

    asyncio.run(go())


# -- the exits -----------------------------------------------------------------------------


def _api(api: httpx.Client, paths: list[str]) -> str:
    texts = []
    for path in paths:
        answer = api.get(path)
        assert answer.status_code == 200, (path, answer.text)
        texts += _strings(answer.json())
    return "\n".join(texts)


def _cli(server: LiveServer, run_ids: list[str], job_id: str, task_id: str, proc: str) -> str:
    remote = ("--server", server.url, "--token", server.tokens["admin"])
    shown = []
    for args in (
        ("runs", "--all"),
        ("show", f"crawl/{run_ids[0]}"),
        ("incidents",),
        ("job", job_id),
        ("task", "output", task_id),
        ("logs", proc),
    ):
        done = wk(*args, *remote)
        assert done.returncode == 0, (args, done.stderr)
        shown.append(done.stdout + done.stderr)
    return "\n".join(shown)


def _pages(
    server: LiveServer, incident_ids: list[int], job_id: str, task_id: str, proc: str
) -> str:
    paths = [
        "/web/",
        "/web/incidents",
        "/web/jobs",
        f"/web/jobs/{job_id}",
        f"/web/tasks/{task_id}",
        f"/web/tasks/{task_id}/output",
        f"/web/procs/{proc}",
        *(f"/web/incidents/{i}" for i in incident_ids),
    ]
    shown = []
    with _login(server) as web:
        for path in paths:
            page = web.get(path)
            assert page.status_code == 200, (path, page.status_code)
            shown.append(html.unescape(page.text))
    return "\n".join(shown)


def _stored(runtime: Runtime, run_ids: list[str], job_ids: list[str]) -> str:
    texts = []
    for run_id in run_ids:
        run = runtime.store.runs.get("crawl", run_id)
        texts += [run.title, run.step or "", run.failure_reason or "", run.detail or ""]
    for found in runtime.store.incidents.list():
        incident = runtime.store.incidents.get(found.id)
        texts += [incident.title, incident.reason, *(e.detail or "" for e in incident.events)]
    texts += [runtime.queue.job(job_id).title for job_id in job_ids]
    return "\n".join(texts)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("exits")
    (tmp / "data").mkdir()
    shutil.copy(sqlite_template, tmp / "data" / "watchkeeper.db")
    url = f"sqlite:///{tmp / 'data' / 'watchkeeper.db'}"
    log = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogRecordFactory())
    root.handlers = [logging.StreamHandler(log)]
    logsafety.install(logging.DEBUG)
    clock = ManualClock(T0)
    found = World()
    try:
        with tg.fake_telegram() as fake:
            telegram = {
                "bot_token": tg.TOKEN,
                "webhook_secret": tg.WEBHOOK_SECRET,
                "base_url": fake.url,
                "timeout_s": 5,
            }
            settings = make_settings(tmp, url, telegram=telegram)
            runtime = Runtime.open(
                settings, clock=clock, store=Store(url), notifier=OpsNotifier(settings.ops)
            )
            try:
                with live_server(runtime) as server, server.client() as api:
                    run_ids = _push_runs(api)
                    job_ids, task_id = _jobs(api)
                    proc = _process(runtime, tmp)
                    sweep(runtime)
                    _deliver(runtime, clock)
                    incidents = [i.id for i in runtime.store.incidents.list()]
                    found.exits["api"] = _api(
                        api,
                        [
                            "/api/v1/runs?all=true",
                            "/api/v1/incidents",
                            "/api/v1/incidents/export?format=json",
                            "/api/v1/jobs",
                            f"/api/v1/tasks/{task_id}",
                            f"/api/v1/tasks/{task_id}/output",
                            f"/api/v1/tasks/{task_id}/output?all=true",
                            f"/api/v1/timeline?task_id={task_id}",
                            f"/api/v1/procs/{proc}/log",
                            *(f"/api/v1/runs/crawl/{run_id}" for run_id in run_ids),
                            *(f"/api/v1/incidents/{i}" for i in incidents),
                            *(f"/api/v1/jobs/{job_id}" for job_id in job_ids),
                        ],
                    )
                    found.exits["csv"] = api.get("/api/v1/incidents/export?format=csv").text
                    found.exits["cli"] = _cli(server, run_ids, job_ids[0], task_id, proc)
                    found.exits["dashboard"] = _pages(server, incidents, job_ids[0], task_id, proc)
                    found.exits["cards"] = "\n".join(m.text for m in fake.messages(CHAT))
                    found.exits["stored rows"] = _stored(runtime, run_ids, job_ids)
                    found.stored_argv = runtime.queue.job(job_ids[0]).payload["argv"]
            finally:
                runtime.sweeper.close()
        found.exits["server log"] = log.getvalue()
        yield found
    finally:
        handlers, level, factory = saved
        root.handlers = handlers
        root.setLevel(level)
        logging.setLogRecordFactory(factory)


EXITS = ["api", "csv", "cli", "dashboard", "cards", "server log", "stored rows"]


@pytest.mark.parametrize("exit", EXITS)
def test_no_shape_leaves_through(world: World, exit: str) -> None:
    assert raw_runs(world.exits[exit]) == {}


@pytest.mark.parametrize("exit", [e for e in EXITS if e != "server log"])
def test_the_inputs_reached_the_exit_masked(world: World, exit: str) -> None:
    shown = world.exits[exit]
    assert "charge with" in shown and "paid with" in shown  # the text around the secrets
    assert all(mask in shown for mask in MASKS), exit


def test_a_tasks_argv_is_stored_as_given_for_its_runner(world: World) -> None:
    assert world.stored_argv == ["echo", *PIECES]
