"""The Node SDK in ``sdk/node`` builds and passes its own tests against a real server.

Its tests (``npm test``: ``tsc``, then Node's test runner) start ``watchkeeper serve``
from this environment, so they run here, in ``make test`` and in CI. ``make test``
installs the SDK's compiler from its lock file first (``make node``); a test never
downloads. Without ``node``, or without that install, they are skipped, except under CI
(``CI`` set), where either is a broken set-up, not a reason to pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2] / "sdk" / "node"
#: Longest the build and the Node tests may take together.
TEST_TIMEOUT_S = 180

pytestmark = pytest.mark.slow


def _npm(*args: str) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    assert npm is not None, "node is installed but npm is not"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"WATCHKEEPER_URL", "WATCHKEEPER_TOKEN", "NODE_OPTIONS"}
    }
    # The server the tests start is this environment's, wherever the tree is.
    env["WATCHKEEPER_BIN"] = str(Path(sys.executable).parent / "watchkeeper")
    return subprocess.run(
        [npm, *args],
        cwd=SDK,
        env=env,
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT_S,
        check=False,
    )


def _installed() -> bool:
    """Whether ``node_modules`` is there and no older than the lock file."""
    marker = SDK / "node_modules" / ".package-lock.json"
    lock = SDK / "package-lock.json"
    return marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime


def test_the_node_sdk_builds_and_passes_its_tests_against_a_real_server() -> None:
    missing = None
    if shutil.which("node") is None:
        missing = "node is not installed"
    elif not _installed():
        missing = "the SDK's compiler is not installed: run `make node` (make test does)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}, and CI must run the Node SDK's tests")
        pytest.skip(missing)
    tested = _npm("test")
    assert tested.returncode == 0, tested.stdout[-20_000:] + tested.stderr[-5_000:]
    assert "# fail 0" in tested.stdout, tested.stdout[-20_000:]
