"""``pip install watchkeeper`` from the built wheel works in a clean venv, with no network.

The wheel is built from this tree; its dependencies come from a wheelhouse packed
from this environment's installed distributions (see ``wheelhouse.py``), and pip
is told to use nothing else. So the wheel's own metadata must name every
dependency, and its files must include everything ``serve`` needs at run time
(migrations, templates, the dashboard's and the API docs' assets).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import patient_http
from watchkeeper import __version__

from ..support.live_server import free_port
from ..support.serving import healthy
from ..support.waiting import wait_for
from .wheelhouse import wheelhouse

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(arg) for arg in argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=_clean_env(),
        check=False,
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


def _clean_env() -> dict[str, str]:
    """This environment without anything that would point at the development venv or tree."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not key.startswith("PIP_")
    }
    # Only the wheelhouse: no index, no find-links from a pip configuration file.
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _install_wheel(tmp: Path) -> Path:
    """A fresh venv with the wheel built from this tree installed; returns its ``bin``."""
    house = tmp / "wheelhouse"
    wheelhouse(["watchkeeper"], house)
    pip = (sys.executable, "-m", "pip")
    _run(*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", house, REPO)
    built = sorted(house.glob("watchkeeper-*.whl"))
    assert [wheel.name for wheel in built] == [f"watchkeeper-{__version__}-py3-none-any.whl"]
    venv = tmp / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(*pip, "--python", python, "install", "--no-index", "--find-links", house, built[0])
    return venv / "bin"


def _serve(installed: Path, tmp_path: Path) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text('data_dir = "data"\ncheck_interval_s = 1\n')
    port = free_port()
    process = subprocess.Popen(
        [installed / "watchkeeper", "--config", config, "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
    )
    assert process.stdout is not None
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(process.stdout or []), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: healthy(url) or process.poll() is not None,
            what="the installed server answering /healthz",
        )
        assert process.poll() is None, "".join(log)
        assert patient_http.get(url + "/healthz", timeout=5).status_code == 200
        # Package data made it into the wheel: the dashboard's and the API docs' files.
        for path in ("/web/static/dashboard.js", "/docs/assets/swagger-ui-bundle.js"):
            answer = patient_http.get(url + path, timeout=5)
            assert answer.status_code == 200, (path, answer.status_code)
        assert "/docs/assets/swagger-ui.css" in patient_http.get(url + "/docs", timeout=5).text
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=5)
        process.stdout.close()


def test_the_built_wheel_installs_offline_into_a_clean_venv_and_serves(tmp_path: Path) -> None:
    # One test, not three: building and installing takes most of a minute, once is enough.
    installed = _install_wheel(tmp_path)
    home = tmp_path / "elsewhere"
    home.mkdir()
    where = _run(
        installed / "python", "-c", "import watchkeeper; print(watchkeeper.__file__)", cwd=home
    ).stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where
    assert not Path(where).is_relative_to(REPO), where
    helped = _run(installed / "watchkeeper", "--help", cwd=home)
    assert "serve" in helped.stdout
    told = _run(installed / "watchkeeper", "--version", cwd=home)
    assert told.stdout.strip() == f"watchkeeper {__version__}"
    _serve(installed, home)
