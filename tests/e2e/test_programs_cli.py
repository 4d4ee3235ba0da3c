"""``watchkeeper programs``: status, start, stop, restart and logs against a real server that runs
the programs of its configuration; and the programs die with a server that is killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ..support.cli import WK, cli_env, wk
from ..support.serving import serving
from ..support.waiting import wait_for

pytestmark = pytest.mark.slow(seconds=40)

# Prints a line now and then (the second argument says how often), forever.
TALKER = "import sys, time\nn = 0\nwhile True:\n    print(f'{sys.argv[1]} says {n}', flush=True)\n    n += 1\n    time.sleep(float(sys.argv[2]))\n"  # noqa: E501


def config(tmp_path: Path) -> Path:
    talker = tmp_path / "talker.py"
    talker.write_text(TALKER)
    run = f'["{sys.executable}", "{talker}"'
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f"""data_dir = "{tmp_path / "data"}"

[programs.api]
command = {run}, "api", "0.2"]
start_s = 0

[programs.db]
command = {run}, "db", "60"]
start_s = 0
group = "crawl"

[programs.crawler]
command = {run}, "crawler", "60"]
start_s = 0
group = "crawl"

[groups.crawl]
strategy = "rest_for_one"
"""
    )
    return file


def status(url: str, token: str) -> dict[str, dict[str, object]]:
    listed = wk("programs", "--json", "--server", url, "--token", token)
    assert listed.returncode == 0, listed.stderr
    return {p["name"]: p for p in json.loads(listed.stdout)["programs"]}


def test_programs_are_listed_stopped_started_restarted_and_their_logs_followed(
    tmp_path: Path,
) -> None:
    with serving(config(tmp_path)) as (_process, url, token):
        auth = ("--server", url, "--token", token)
        wait_for(
            lambda: all(p["state"] == "running" for p in status(url, token).values()),
            what="every program running",
        )
        table = wk("programs", *auth)
        stopped = wk("programs", "stop", "crawler", *auth)
        after_stop = status(url, token)
        started = wk("programs", "start", "crawler", *auth)
        wait_for(lambda: status(url, token)["crawler"]["state"] == "running")
        before = status(url, token)["crawler"]["pid"]
        restarted = wk("programs", "restart", "crawler", *auth)
        after = wait_for(lambda: (p := status(url, token)["crawler"])["state"] == "running" and p)
        group = wk("programs", "stop", "crawl", *auth)
        logs = wk("programs", "logs", "api", *auth)
        follower = subprocess.Popen(
            [*WK, "programs", "logs", "api", "-f", *auth],
            stdout=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        assert follower.stdout is not None
        seen = [follower.stdout.readline() for _ in range(40)]
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=20)
        follower.stdout.close()
        unknown = wk("programs", "stop", "nosuch", *auth)
    assert table.returncode == 0, table.stderr
    assert "Programs on " in table.stdout and "crawler" in table.stdout
    assert "running" in table.stdout and "crawl" in table.stdout
    assert stopped.stdout.startswith("crawler stopped"), stopped.stderr
    assert after_stop["crawler"]["state"] == "stopped"
    assert after_stop["db"]["state"] == "running"  # rest_for_one: only what comes after
    assert started.stdout.strip() == "crawler started", started.stderr
    assert restarted.stdout.strip() == "crawler restarted", restarted.stderr
    assert after["pid"] != before and after["restarts"] >= 2
    assert group.stdout.strip() == "group crawl stopped"
    assert "api says 0" in logs.stdout
    numbers = [int(line.split()[-1]) for line in seen if line.startswith("api says")]
    assert numbers[-1] > numbers[0]  # it kept printing what the program wrote
    assert unknown.returncode != 0
    assert "no program or group 'nosuch'" in unknown.stderr
    assert "api, crawl, crawler, db" in unknown.stderr


def test_a_program_dies_with_a_server_that_is_killed(tmp_path: Path) -> None:
    with serving(config(tmp_path)) as (process, url, token):
        found = wait_for(lambda: (p := status(url, token)["api"])["pid"] and p)
        pid = int(found["pid"])  # type: ignore[call-overload]
        assert psutil.Process(pid).is_running()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=20)
        wait_for(lambda: not _runs(pid), what="the program ended with its server")


def _runs(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
