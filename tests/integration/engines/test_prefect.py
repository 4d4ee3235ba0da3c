"""The prefect engine kind against a real Prefect server (on SQLite, one per session) and real
flow runs started by a Prefect runner (``serve``, a subprocess).

A hung run is stalled within its budget, a run whose runner is killed with SIGKILL is stuck
once its heartbeats stop, a failure is failed, a paused run is waiting; Cancel and Retry act
through the Prefect API and Prefect shows it. On both stores.

Prefect pins packages watchkeeper pins at other versions (no Prefect release accepts
watchkeeper's FastAPI and websockets), so it is not in watchkeeper's lock: these tests run
Prefect from an interpreter of its own: the one `make test` installs from
requirements-prefect.lock (``.venv-prefect``), or the one ``WATCHKEEPER_TEST_PREFECT_PYTHON``
names. watchkeeper's adapter itself only speaks HTTP and needs no Prefect package.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.support import patient_http
from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition, RunStatus
from watchkeeper.decide.decider import Outcome
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.engines.prefect import PrefectAdapter

from ...support.live_server import free_port
from ...support.waiting import wait_for
from ...support.workers import APPS
from ..helpers import sweep
from .conftest import ANA, OpenRuntime, live_incident, run_of

# One worker runs the module, so one Prefect server (slow to start, busy when idle) serves
# both stores' tests and is stopped with the module.
pytestmark = [pytest.mark.slow(seconds=240), pytest.mark.xdist_group("prefect")]
BUDGET_S = 300
#: Prefect's flows beat at most every 30 s: a grace a little longer tells a dead run by the next.
GRACE_S = 40


#: The interpreter `make test` installs Prefect into (requirements-prefect.lock).
INSTALLED = Path(__file__).resolve().parents[3] / ".venv-prefect" / "bin" / "python"


def prefect_python() -> str:
    """``WATCHKEEPER_TEST_PREFECT_PYTHON``, else the one `make test` installs; locally a missing
    one skips, under CI it fails (as a missing PostgreSQL does)."""
    found = Path(os.environ.get("WATCHKEEPER_TEST_PREFECT_PYTHON", "") or INSTALLED)
    if not found.exists():
        problem = (
            f"no Prefect interpreter at {found}: run `make engines`, or set "
            "WATCHKEEPER_TEST_PREFECT_PYTHON to a Python with prefect installed"
        )
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    return str(found)


def prefect_env(folder: Path, api: str | None = None, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PREFECT_HOME": str(folder),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        **extra,
    }
    if api is not None:
        env["PREFECT_API_URL"] = api
    return env


def stop_tree(process: subprocess.Popen[bytes], kill: bool = False) -> None:
    """Stop a process and every process it started (a runner starts each flow run apart)."""
    try:
        family = [*psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for member in [psutil.Process(process.pid), *family] if process.poll() is None else family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill() if kill else member.terminate()
    process.wait(timeout=30)
    psutil.wait_procs(family, timeout=30)


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prefect server on SQLite, started once for the module (it is slow to start)."""
    python = prefect_python()
    folder = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    env = prefect_env(
        folder,
        PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{folder / 'prefect.db'}",
    )
    with (folder / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [
                python,
                "-m",
                "prefect",
                "server",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        api = f"http://127.0.0.1:{port}/api"
        try:
            wait_for(lambda: _healthy(api), what="the Prefect server up", timeout=300)
            yield api
        finally:
            stop_tree(server)


def _healthy(api: str) -> bool:
    try:
        return patient_http.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class Runner:
    """``prefect_app.py`` served by a Prefect runner subprocess."""

    def __init__(self, api: str, folder: Path, suffix: str = "") -> None:
        env = prefect_env(
            folder,
            api,
            PREFECT_RUNNER_POLL_FREQUENCY="1",
            PREFECT_FLOWS_HEARTBEAT_FREQUENCY="30",
        )
        self.api = api
        self.suffix = suffix
        self.log = (folder / "runner.log").open("wb")
        self.process = subprocess.Popen(
            [prefect_python(), "prefect_app.py", suffix],
            env=env,
            cwd=APPS,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def served(self) -> bool:
        name = f"{self.api}/deployments/name/ask/ask{self.suffix}"
        return patient_http.get(name).status_code == 200

    def start(self, flow: str, **parameters: Any) -> str:
        """A new run of ``flow``'s deployment; a busy server's 503 is asked again, as Prefect's
        own client does."""
        found = patient_http.get(
            f"{self.api}/deployments/name/{flow}/{flow}{self.suffix}", timeout=10
        )
        found.raise_for_status()
        url = f"{self.api}/deployments/{found.json()['id']}/create_flow_run"

        def created() -> str | None:
            answer = patient_http.post(url, json={"parameters": parameters}, timeout=30)
            if answer.status_code == 503:
                return None
            answer.raise_for_status()
            return str(answer.json()["id"])

        return wait_for(created, what=f"a run of {flow} created", interval=0.5)

    def stop(self, kill: bool = False) -> None:
        stop_tree(self.process, kill=kill)
        self.log.close()


def state(api: str, run_id: str) -> str:
    return str(patient_http.get(f"{api}/flow_runs/{run_id}").json()["state_type"])


@pytest.fixture(scope="module")
def runner(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    served = Runner(prefect_api, tmp_path_factory.mktemp("prefect-runner"))
    try:
        wait_for(served.served, what="the deployments served", timeout=120)
        yield served
    finally:
        served.stop()


def kinds(api: str, **extra: Any) -> dict[str, Any]:
    return {"flows": {"engine": "prefect", "url": api, "budget_s": BUDGET_S, **extra}}


def test_a_hung_run_is_stalled_within_its_budget_and_cancel_stops_it(
    runner: Runner, engine_runtime: OpenRuntime, now_clock: ManualClock, tmp_path: Path
) -> None:
    runtime = engine_runtime(kinds(runner.api))
    run_id = runner.start("hang", gate=str(tmp_path / "gate"))
    run = wait_for(
        lambda: (r := run_of(runtime, "flows", run_id, now_clock())) and r.owner.alive and r,
        what="the run running, with its first heartbeat",
        timeout=120,
    )
    assert run.status is RunStatus.RUNNING and run.progress_at is not None
    now_clock.set(max(now_clock(), run.progress_at) + timedelta(seconds=BUDGET_S - 1))
    sweep(runtime)
    assert live_incident(runtime, run_id) is None
    now_clock.advance(2)
    sweep(runtime)
    incident = live_incident(runtime, run_id)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    pressed = runtime.decider.press(incident.id, "cancel", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    wait_for(
        lambda: state(runner.api, run_id) == "CANCELLED", what="Prefect cancelling it", timeout=120
    )
    sweep(runtime)
    assert live_incident(runtime, run_id) is None


def test_task_runs_and_logs_are_progress(
    runner: Runner, engine_runtime: OpenRuntime, now_clock: ManualClock, tmp_path: Path
) -> None:
    runtime = engine_runtime(kinds(runner.api))
    gate = tmp_path / "gate"
    run_id = runner.start("steps", gate=str(gate))
    first = wait_for(
        lambda: (
            (r := run_of(runtime, "flows", run_id, now_clock()))
            and r.status.value == "running"
            and r
        ),
        what="the run running",
        timeout=120,
    )
    Path(f"{gate}.1").touch()
    moved = wait_for(
        lambda: (
            (r := run_of(runtime, "flows", run_id, now_clock()))
            and r.progress_at
            and first.progress_at
            and r.progress_at > first.progress_at
            and r
        ),
        what="its first task run's end read as progress",
    )
    assert moved.status is RunStatus.RUNNING
    now_clock.set(moved.progress_at + timedelta(seconds=BUDGET_S - 1))
    sweep(runtime)
    assert live_incident(runtime, run_id) is None
    for number in (2, 3):
        Path(f"{gate}.{number}").touch()
    wait_for(lambda: state(runner.api, run_id) == "COMPLETED", what="the run completing")


def test_a_failure_is_failed_and_retry_runs_it_again(
    runner: Runner, engine_runtime: OpenRuntime, now_clock: ManualClock, tmp_path: Path
) -> None:
    runtime = engine_runtime(kinds(runner.api))
    run_id = runner.start("boom", counter=str(tmp_path / f"ran-{uuid.uuid4().hex[:6]}"))
    wait_for(lambda: state(runner.api, run_id) == "FAILED", what="the run failing", timeout=120)
    sweep(runtime)
    incident = live_incident(runtime, run_id)
    assert incident is not None and incident.key.condition == Condition.FAILED.value
    assert "cannot parse the page" in incident.reason
    pressed = runtime.decider.press(incident.id, "retry_checked", incident.state_token, ANA)
    assert pressed.outcome is Outcome.DONE, pressed.message
    wait_for(
        lambda: state(runner.api, run_id) == "COMPLETED",
        what="the same run completing",
        timeout=120,
    )
    sweep(runtime)
    assert live_incident(runtime, run_id) is None


def test_a_paused_run_is_waiting_never_stalled(
    runner: Runner, engine_runtime: OpenRuntime, now_clock: ManualClock
) -> None:
    runtime = engine_runtime(kinds(runner.api))
    run_id = runner.start("ask")
    wait_for(lambda: state(runner.api, run_id) == "PAUSED", what="the run pausing", timeout=120)
    run = run_of(runtime, "flows", run_id, now_clock())
    assert run is not None and run.status is RunStatus.WAITING
    now_clock.advance(BUDGET_S * 10)
    sweep(runtime)
    assert live_incident(runtime, run_id) is None
    patient_http.post(
        f"{runner.api}/flow_runs/{run_id}/set_state",
        json={"state": {"type": "CANCELLING", "name": "Cancelling"}},
        timeout=10,
    )


def test_a_run_whose_runner_is_killed_is_stuck_once_its_heartbeats_stop(
    prefect_api: str,
    runner: Runner,
    engine_runtime: OpenRuntime,
    now_clock: ManualClock,
    tmp_path: Path,
) -> None:
    runtime = engine_runtime(kinds(prefect_api, heartbeat_grace_s=GRACE_S))
    doomed = Runner(prefect_api, tmp_path, "-doomed")
    try:
        wait_for(doomed.served, what="the second runner's deployments", timeout=120)
        run_id = doomed.start("hang", gate=str(tmp_path / "gate"))
        wait_for(
            lambda: (r := run_of(runtime, "flows", run_id, now_clock())) and r.owner.alive,
            what="the run beating",
            timeout=120,
        )
    finally:
        doomed.stop(kill=True)
    # The server's clock runs on: the verdict waits for the grace to pass, not for a sleep.
    wait_for(
        lambda: (r := run_of(runtime, "flows", run_id, now_clock())) and r.owner.alive is False,
        what="its heartbeats stopping",
        timeout=GRACE_S + 60,
    )
    sweep(runtime)
    incident = live_incident(runtime, run_id)
    assert incident is not None and incident.key.condition == Condition.STUCK.value


def test_an_unreachable_api_is_unreadable_naming_it() -> None:
    api = f"http://127.0.0.1:{free_port()}/api"
    table = {"engine": "prefect", "url": api}
    settings = config.parse({"kinds": {"flows": table}}, "test")
    adapter = PrefectAdapter("flows", KindConfig(**table), AdapterContext(settings, None))
    read = asyncio.run(adapter.read_contained(datetime.now(UTC)))
    assert read.error is not None
    assert read.error.startswith(f"cannot reach the Prefect API at {api}")
