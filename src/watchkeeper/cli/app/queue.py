"""Commands for the job queue: ``submit``, ``jobs``, ``job``, ``cancel``, ``retry``,
``delete``, ``runner``, ``runners`` and ``task output``.

They talk to a watchkeeper server over its API (``--server`` or
``WATCHKEEPER_URL``, ``--token`` or ``WATCHKEEPER_TOKEN``): the server owns
leases, their recovery and cold starts, and runners may live on other hosts.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from watchkeeper.cli.app.common import settings
from watchkeeper.cli.app.options import (
    JSON,
    SERVER,
    TOKEN,
    connect,
    print_json,
    print_rows,
    print_table,
    say,
)

_JOB = typer.Argument(..., help="the job's id (see `watchkeeper jobs`)")
_TASK = typer.Argument(..., help="the task's id (see `watchkeeper job JOB_ID`)")
task_app = typer.Typer(help="One task of a job.", no_args_is_help=True)
# The server's form of a job or task id; anything else names no job, whatever it looks like.
_ID = re.compile(r"[a-z]-[0-9a-f]{1,60}")


def _known_form(what: str, value: str, where: str) -> str:
    """``value`` if it can be a ``what``'s id, else "no such", naming where the ids are listed."""
    if _ID.fullmatch(value) is None:
        from watchkeeper.errors import NotFound

        raise NotFound(f"no {what} {value!r}: {what} ids look like {what[0]}-1a2b3c; see {where}")
    return value


def _check_origin(value: str) -> None:
    """Refuse a malformed ``--origin`` before asking the server, saying how to write it."""
    from watchkeeper.procs.github_results import canonical

    try:
        canonical(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--origin") from None


def submit(
    argv: list[str] = typer.Argument(
        None, metavar="CMD", help="the command and its arguments, after --"
    ),
    fleet: str | None = typer.Option(None, "--fleet", help="the fleet whose runners may run it"),
    org: str | None = typer.Option(None, "--org", help="the org it counts against"),
    title: str | None = typer.Option(None, "--title", help="a short human title"),
    cwd: str | None = typer.Option(None, "--cwd", help="working folder on the runner's host"),
    not_rerunnable: bool = typer.Option(
        False, "--not-rerunnable", help="its effects are unknown: never run it again by itself"
    ),
    max_attempts: int | None = typer.Option(None, "--max-attempts", min=1),
    origin: str | None = typer.Option(
        None,
        "--origin",
        help="the pull request or issue it came from, github:OWNER/REPO#N: "
        "the server says there how it ended",
    ),
    resume: bool = typer.Option(
        False, "--resume", help="add a continuation task to --task-id's job instead"
    ),
    task_id: str | None = typer.Option(None, "--task-id", help="the task to resume"),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    as_json: bool = JSON,
) -> None:
    """Queue a job running CMD on a runner of FLEET: `submit --fleet F --org O -- CMD`.

    `submit --resume --task-id ID [-- CMD]` adds a continuation task to the
    task's job (same fleet and org), running CMD or else the task's own command.
    """
    payload: dict[str, Any] = {"argv": list(argv or [])}
    if cwd:
        payload["cwd"] = cwd
    if resume:
        _resume(task_id, payload if argv else None, server, token, as_json)
        return
    if not argv or not fleet or not org:
        raise typer.BadParameter("give --fleet, --org and the command after --")
    if origin is not None:
        _check_origin(origin)
    with connect(server, token) as client:
        job = client.jobs.submit(
            title or " ".join(argv)[:200],
            org=org,
            fleet=fleet,
            payload=payload,
            rerunnable=not not_rerunnable,
            max_attempts=max_attempts,
            origin=origin,
        )
    if as_json:
        print_json(job)
        return
    say(job["id"])
    blocked = job["tasks"][0].get("blocked")
    if blocked:
        say(f"queued: {blocked['code']}: {blocked['message']}")


def _resume(
    task_id: str | None,
    payload: dict[str, Any] | None,
    server: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """``submit --resume``: a continuation task on ``task_id``'s job (``payload`` ``None``
    runs the task's own command again)."""
    if not task_id:
        raise typer.BadParameter("--resume needs --task-id", param_hint="--task-id")
    _known_form("task", task_id, "`watchkeeper job JOB_ID`")
    with connect(server, token) as client:
        task = client.jobs.resume(task_id, payload)
    if as_json:
        print_json(task)
        return
    say(f"{task['id']} (job {task['job_id']}, task {task['seq']})")


def jobs(
    status: str | None = typer.Option(None, "--status", help="queued, running, succeeded, ..."),
    fleet: str | None = typer.Option(None, "--fleet"),
    org: str | None = typer.Option(None, "--org"),
    limit: int = typer.Option(200, "--limit", min=1, max=5000),
    server: str | None = SERVER,
    token: str | None = TOKEN,
    as_json: bool = JSON,
) -> None:
    """List jobs, newest first, with why each queued one has not started."""
    with connect(server, token) as client:
        found = client.jobs.list(status=status, fleet=fleet, org=org, limit=limit)
    print_rows(as_json, "Jobs", _JOB_COLUMNS, found, _job_row)


_JOB_COLUMNS = ("id", "title", "org", "fleet", "status", "tasks", "why it waits")


def _job_row(job: dict[str, Any]) -> tuple[str, ...]:
    return (
        job["id"],
        job["title"][:60],
        job["org"],
        job["fleet"],
        job["status"],
        str(len(job["tasks"])),
        _why(job["tasks"]),
    )


def _why(tasks: list[dict[str, Any]]) -> str:
    for task in tasks:
        blocked = task.get("blocked")
        if blocked:
            return f"{blocked['code']}: {blocked['message']}"
    return ""


def _show_job(body: dict[str, Any], _job_id: str) -> None:
    for key in ("id", "title", "status", "org", "fleet", "submitted_by", "created_at"):
        say(f"{key:>13}  {body[key]}")
    say(f"{'command':>13}  {' '.join(body['payload'].get('argv', []))}")
    for task in body["tasks"]:
        line = f"  task {task['id']} (#{task['seq']}) {task['status']}"
        line += f", attempt {task['attempt']}/{task['max_attempts']}"
        if task["runner_id"]:
            line += f", runner {task['runner_id']}"
        if task.get("failure"):
            line += f": {task['failure']['reason']}"
        say(line)
        if task.get("blocked"):
            say(f"    {task['blocked']['code']}: {task['blocked']['message']}")
    for event in body.get("timeline", []):
        detail = f" ({event['detail']})" if event["detail"] else ""
        say(f"  {event['at']}  {event['task_id']}  {event['type']}{detail}")


def _show_moved(past: str) -> Callable[[dict[str, Any], str], None]:
    def show(done: dict[str, Any], job_id: str) -> None:
        count = done["affected"]
        say(f"{past} {count} task{'s' if count != 1 else ''} of job {job_id}")

    return show


def _job_command(
    name: str, call: str, doc: str, show: Callable[[dict[str, Any], str], None]
) -> Callable[..., None]:
    """Command ``name``: ``client.jobs.<call>(job_id)``, its answer as JSON or ``show``n."""

    def command(
        job_id: str = _JOB,
        server: str | None = SERVER,
        token: str | None = TOKEN,
        as_json: bool = JSON,
    ) -> None:
        _known_form("job", job_id, "`watchkeeper jobs`")
        with connect(server, token) as client:
            body = getattr(client.jobs, call)(job_id)
        if as_json:
            print_json(body)
            return
        show(body, job_id)

    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    return command


job = _job_command(
    "job", "get", "One job: status, tasks, why a queued task waits, and its timeline.", _show_job
)
cancel = _job_command(
    "cancel",
    "cancel",
    "Cancel a job: queued tasks never start, running ones are aborted by their runner.",
    _show_moved("cancelled"),
)
retry = _job_command(
    "retry",
    "retry",
    "Queue a job's failed, cancelled and stuck tasks again.",
    _show_moved("queued again"),
)
delete = _job_command(
    "delete",
    "delete",
    "Delete a job and its tasks (cancel it first if a task runs).",
    _show_moved("deleted"),
)


def runner(
    ctx: typer.Context,
    fleet: str = typer.Option(..., "--fleet", help="the fleet this runner serves"),
    capacity: int = typer.Option(1, "--capacity", min=1, max=1000, help="tasks at once"),
    org: str | None = typer.Option(None, "--org", help="serve only this org's tasks"),
    name: str | None = typer.Option(None, "--name", help="a short human name"),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="where its process runs are kept (default: DATA_DIR/runner)"
    ),
    heartbeat: float = typer.Option(5.0, "--heartbeat-interval", min=0.05, help="seconds"),
    poll: float = typer.Option(1.0, "--poll-interval", min=0.01, help="seconds"),
    renew: float | None = typer.Option(
        None, "--renew-interval", min=0.05, help="seconds (default: a third of each lease)"
    ),
    grace: float = typer.Option(5.0, "--grace", min=0, help="SIGTERM to SIGKILL on abort"),
    pass_env: list[str] = typer.Option(
        [],
        "--pass-env",
        help="an environment variable tasks get beyond PATH, HOME, LANG, LC_*, TZ, TMPDIR, "
        "USER, LOGNAME, SHELL, TERM (repeat for more); the runner's token never reaches a task",
    ),
    servers: list[str] = typer.Option(
        [],
        "--server",
        envvar="WATCHKEEPER_URL",
        metavar="URL",
        help="a server's URL; repeat it or separate URLs with commas to name several replicas "
        "of one server: the runner uses one and moves to the next when it is down",
    ),
    token: str | None = TOKEN,
) -> None:
    """Serve a fleet: lease its tasks, run each as a subprocess, report the outcome."""
    import logging
    import signal
    import threading

    from watchkeeper import logsafety
    from watchkeeper.client.failover import FailoverClient, split_urls
    from watchkeeper.client.wire import TOKEN_ENV
    from watchkeeper.queue.runner import RunnerDaemon, RunnerOptions
    from watchkeeper.queue.runner_env import forget_token
    from watchkeeper.queue.task_env import check_pass_env

    logsafety.install(logging.INFO)
    # Its tasks run as its user: read the token once, then leave it nowhere they could look.
    from_env = forget_token(TOKEN_ENV)
    token = token or from_env
    # A runner's log is its tasks' story; the local store's schema steps are not news each start.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    folder = data_dir or settings(ctx).data_dir / "runner"
    passed = check_pass_env(pass_env)
    options = RunnerOptions(
        fleet, capacity, org, name, folder, heartbeat, poll, renew, grace, passed
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    urls = split_urls(servers)
    client = (
        FailoverClient(urls, token) if len(urls) > 1 else connect(next(iter(urls), None), token)
    )
    with client:
        daemon = RunnerDaemon.open(client, options)
        try:
            runner_id = daemon.register()
            say(f"runner {runner_id} serves fleet {fleet} (capacity {capacity})")
            daemon.run(stop)
        finally:
            daemon.close()


def runners(server: str | None = SERVER, token: str | None = TOKEN, as_json: bool = JSON) -> None:
    """Fleets and runners: which are alive, and what each runs now."""
    with connect(server, token) as client:
        body = client.runners.topology()
    if as_json:
        print_json(body)
        return
    fleet_columns = ("fleet", "runners", "alive", "capacity", "running", "queued")
    print_table(
        "Fleets",
        fleet_columns,
        ([str(fleet[key]) for key in fleet_columns] for fleet in body["fleets"]),
        fold=False,
    )
    print_table(
        f"Runners ({len(body['runners'])})", _RUNNER_COLUMNS, map(_runner_row, body["runners"])
    )


_RUNNER_COLUMNS = ("id", "fleet", "host", "alive", "last heartbeat", "load", "tasks")


def _runner_row(item: dict[str, Any]) -> tuple[str, ...]:
    return (
        item["id"],
        item["fleet"],
        f"{item['host']}:{item['pid']}",
        "yes" if item["alive"] else "no",
        f"{item['heartbeat_age_s']:.0f} s ago",
        f"{item['running']}/{item['capacity']}",
        ", ".join(task["id"] for task in item["tasks"]),
    )


@task_app.command("output")
def task_output(
    task_id: str = _TASK,
    server: str | None = SERVER,
    token: str | None = TOKEN,
    as_json: bool = JSON,
    whole: bool = typer.Option(
        False, "--all", help="all its last run shipped, not the tail (says when cut at the cap)"
    ),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="with --all: keep printing while the task runs"
    ),
    interval: float = typer.Option(1.0, "--interval", min=0.05, help="seconds between looks"),
) -> None:
    """What a task printed: the redacted tail its runner sent when it ended, or ``--all`` of it."""
    if follow and not whole:
        raise typer.BadParameter("--follow needs --all: only all of the output grows as it runs")
    _known_form("task", task_id, "`watchkeeper job JOB_ID`")
    with connect(server, token) as client:
        if whole and follow and not as_json:
            _follow_output(client, task_id, interval)
            return
        body = client.jobs.output(task_id, all=whole)
    if as_json:
        print_json(body)
        return
    if body["output"] is None:
        when = "ships it while the task runs" if whole else "sends it when the task ends"
        say(
            f"no output of task {task_id} yet: its runner {when} "
            f"(see `watchkeeper job` for the task's status)",
            stderr=True,
        )
        return
    _write_output(body["output"], end=True)
    if whole and body["note"]:
        say(body["note"], stderr=True)


def _write_output(text: str, *, end: bool) -> None:
    # As printed, not through the console: output is neither markup nor a line to wrap.
    sys.stdout.write(text + "\n" if end and text and not text.endswith("\n") else text)
    sys.stdout.flush()


def _follow_output(client: Any, task_id: str, interval: float) -> None:
    """Print all of the task's output, then what it gains, until its run stops."""
    import time

    printed = 0
    while True:
        body = client.jobs.output(task_id, all=True)
        text = body["output"] or ""
        going = bool(body["running"])
        if body["output"] is None:  # not started yet, or its runner shipped nothing
            going = client.jobs.task(task_id)["status"] in ("queued", "running")
        _write_output(text[printed:], end=not going)
        printed = len(text)
        if not going:
            if body["note"]:
                say(body["note"], stderr=True)
            return
        time.sleep(interval)
