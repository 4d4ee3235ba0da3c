"""The Node SDK in ``sdk/node`` builds and passes its own tests against a real server.

Its tests (``npm test``: ``tsc``, then Node's test runner) start ``watchkeeper serve``
from this environment, so they run here, in ``make test`` and in CI. ``make test``
installs the SDK's compiler from its lock file first (``make node``); a test never
downloads. Without ``node``, or without that install, they are skipped, except under CI
(``CI`` set), where either is a broken set-up, not a reason to pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper import Client
from watchkeeper.runtime import Runtime

from ..docs.examples import examples
from ..support.live_server import LiveServer, live_server

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
    return _node_tool([npm, *args], SDK, env)


def _node_tool(
    argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``argv`` (npm, tsc or node) to its end, its output kept as text; never raises."""
    return subprocess.run(
        argv,
        cwd=cwd,
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


def page_as_one_module(page: Path, aimed_at: tuple[str, str] | None = None) -> str:
    """The page's ``ts`` blocks as a reader follows them: one module, its imports first,
    each block in a scope inside the one before (it sees the names earlier blocks made and
    may make the same names again).

    ``aimed_at`` (a server's URL and a token): to be run against that server, and a block
    the page marks ``<!-- example: skip WHY -->`` is compiled but never entered (a later
    block cannot use its names)."""
    blocks = examples(page, ("ts",))
    imports = [line for b in blocks for line in b.code.splitlines() if line.startswith("import ")]
    runnable = aimed_at is not None
    scopes = []
    for block in blocks:
        code = block.for_server(*aimed_at) if aimed_at else block.code
        body = "\n".join(line for line in code.splitlines() if not line.startswith("import "))
        if runnable and block.skip:
            body = f"// skipped: {block.skip}\nif (false as boolean) {{\n{body}\n}}"
        scopes.append(f"// {block.name}\n{{\n{body}")
    module = "\n".join(imports) + "\n" + "\n".join(scopes) + "\n" + "}\n" * len(blocks)
    if runnable:
        module += 'console.log("every example ran");\n'
    return module


def _type_check(
    tmp_path: Path, module: str, emit: bool = False
) -> subprocess.CompletedProcess[str]:
    """``tsc`` on ``module`` with the SDK's own compiler options (its tsconfig.json:
    strict, as the SDK is built) and ``"watchkeeper"`` resolved to the SDK's source.

    Only what a page's example needs differs: nothing is written, names an example makes
    for the reader may go unused, and the files are not under the SDK's folder. With
    ``emit``, ``page.mjs`` is written beside it and ``"watchkeeper"`` is the built package
    in ``node_modules``, as a reader has it."""
    (tmp_path / "page.mts").write_text(module, encoding="utf-8")
    options: dict[str, object] = {
        "noEmit": True,
        "incremental": False,
        "declaration": False,
        "noUnusedLocals": False,
        "noUnusedParameters": False,
        "rootDir": "/",
        "typeRoots": [str(SDK / "node_modules" / "@types")],
        "paths": {"watchkeeper": [str(SDK / "src" / "index.ts")]},
    }
    if emit:
        (tmp_path / "node_modules").mkdir(exist_ok=True)
        with contextlib.suppress(FileExistsError):
            (tmp_path / "node_modules" / "watchkeeper").symlink_to(SDK)
        del options["paths"]
        options.update(noEmit=False, sourceMap=False, rootDir=str(tmp_path), outDir=str(tmp_path))
    tsconfig = {
        "extends": str(SDK / "tsconfig.json"),
        "compilerOptions": options,
        "files": ["page.mts"],
        "include": [],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(tsconfig), encoding="utf-8")
    return _node_tool([str(SDK / "node_modules" / ".bin" / "tsc"), "-p", str(tmp_path)])


def test_every_typescript_example_of_the_docs_type_checks_against_the_sdk(tmp_path: Path) -> None:
    """docs/sdk-node.md's examples against the SDK: a renamed call or option, a wrong
    argument or a field the answers do not have fails here, even in a block the page
    says cannot run here."""
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


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_typescript_example_of_the_docs_runs_against_a_live_server(
    server: LiveServer, tmp_path: Path
) -> None:
    """docs/sdk-node.md's examples, run as a reader follows the page, block after block,
    against a real server; a block that cannot run here says why on the page."""
    _need_the_compiler()
    built = _npm("run", "build")
    assert built.returncode == 0, built.stdout[-5_000:] + built.stderr[-5_000:]
    page = ROOT / "docs" / "sdk-node.md"
    blocks = examples(page, ("ts",))
    assert sum(b.skip is None for b in blocks) >= 10, "the page's runnable examples went missing"
    token = server.tokens["admin"]
    # The page reads "your" work: an open incident (a failed run's, opened by a sweep) and
    # queued tasks for its runner to lease.
    with Client(server.url, token=token) as reporter:
        failing = reporter.start("document_job", "render deck")
        reporter.fail("document_job", failing["run_id"], "crashed")
        for number in range(4):
            reporter.jobs.submit(f"build {number}", fleet="cpu", org="acme", argv=["make"])
    asyncio.run(server.runtime.sweeper.sweep())
    compiled = _type_check(tmp_path, page_as_one_module(page, (server.url, token)), emit=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    node = shutil.which("node")
    assert node is not None
    env = {**os.environ, "WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": token}
    env.pop("NODE_OPTIONS", None)
    ran = _node_tool([node, str(tmp_path / "page.mjs")], tmp_path, env)
    assert ran.returncode == 0, (
        "docs/sdk-node.md's examples fail when run (page.mts's lines; each block starts "
        f"with its docs line):\n{ran.stdout[-3_000:]}{ran.stderr[-5_000:]}"
    )
    assert ran.stdout.rstrip().endswith("every example ran"), ran.stdout[-3_000:]
