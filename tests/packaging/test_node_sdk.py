"""The Node SDK in ``sdk/node`` builds and passes its own tests against a real server.

Its tests (``npm test``: ``tsc``, then Node's test runner) start ``watchkeeper serve``
from this environment, so they run here, in ``make test`` and in CI. ``make test``
installs the SDK's compiler from its lock file first (``make node``); a test never
downloads. Without ``node``, or without that install, they are skipped, except under CI
(``CI`` set), where either is a broken set-up, not a reason to pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..docs.examples import examples

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "node"
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


def _need_the_compiler() -> None:
    """Skip without node or the SDK's compiler, except under CI, where that is a failure."""
    missing = None
    if shutil.which("node") is None:
        missing = "node is not installed"
    elif not _installed():
        missing = "the SDK's compiler is not installed: run `make node` (make test does)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}, and CI must run the Node SDK's tests")
        pytest.skip(missing)


def test_the_node_sdk_builds_and_passes_its_tests_against_a_real_server() -> None:
    _need_the_compiler()
    tested = _npm("test")
    assert tested.returncode == 0, tested.stdout[-20_000:] + tested.stderr[-5_000:]
    assert "# fail 0" in tested.stdout, tested.stdout[-20_000:]


def page_as_one_module(page: Path) -> str:
    """The page's ``ts`` blocks as a reader follows them: one module, its imports first,
    each block in a scope inside the one before (it sees the names earlier blocks made and
    may make the same names again)."""
    blocks = examples(page, ("ts",))
    imports = [line for b in blocks for line in b.code.splitlines() if line.startswith("import ")]
    scopes = [
        f"// {b.name}\n{{\n"
        + "\n".join(line for line in b.code.splitlines() if not line.startswith("import "))
        for b in blocks
    ]
    return "\n".join(imports) + "\n" + "\n".join(scopes) + "\n" + "}\n" * len(blocks)


def _type_check(tmp_path: Path, module: str) -> subprocess.CompletedProcess[str]:
    """``tsc`` on ``module`` with the SDK's own compiler options (its tsconfig.json:
    strict, as the SDK is built) and ``"watchkeeper"`` resolved to the SDK's source.

    Only what a page's example needs differs: nothing is written, names an example makes
    for the reader may go unused, and the files are not under the SDK's folder."""
    (tmp_path / "page.mts").write_text(module, encoding="utf-8")
    options = {
        "noEmit": True,
        "incremental": False,
        "declaration": False,
        "noUnusedLocals": False,
        "noUnusedParameters": False,
        "rootDir": "/",
        "typeRoots": [str(SDK / "node_modules" / "@types")],
        "paths": {"watchkeeper": [str(SDK / "src" / "index.ts")]},
    }
    tsconfig = {
        "extends": str(SDK / "tsconfig.json"),
        "compilerOptions": options,
        "files": ["page.mts"],
        "include": [],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(tsconfig), encoding="utf-8")
    return subprocess.run(
        [str(SDK / "node_modules" / ".bin" / "tsc"), "-p", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT_S,
        check=False,
    )


def test_every_typescript_example_of_the_docs_type_checks_against_the_sdk(tmp_path: Path) -> None:
    """docs/sdk-node.md's examples against the SDK: a renamed call or option, a wrong
    argument or a field the answers do not have fails here.

    They are checked, not run: they read ids a reader has (``r-1``, ``t-...``) and no
    server here holds."""
    _need_the_compiler()
    page = ROOT / "docs" / "sdk-node.md"
    assert len(examples(page, ("ts",))) >= 10, "the Node SDK page's examples went missing"
    checked = _type_check(tmp_path, page_as_one_module(page))
    assert checked.returncode == 0, (
        "docs/sdk-node.md's examples do not type-check against the SDK (lines are "
        f"page.mts's; each block starts with its docs line):\n{checked.stdout}{checked.stderr}"
    )


def test_a_wrong_option_in_an_example_is_caught(tmp_path: Path) -> None:
    """The check above can fail: the page with one option misspelt does not type-check."""
    _need_the_compiler()
    module = page_as_one_module(ROOT / "docs" / "sdk-node.md")
    assert "budgetS: 120" in module
    checked = _type_check(tmp_path, module.replace("budgetS: 120", "budgetSecs: 120"))
    assert checked.returncode != 0
    assert "'budgetSecs' does not exist" in checked.stdout
