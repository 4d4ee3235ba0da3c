"""The layers hold: the import contracts of pyproject.toml, the composition root, module sizes.

The contracts themselves are checked by import-linter; a second group of tests
plants an import that crosses the layers in a copy of the package and expects
the contracts to catch it, so a contract that checks nothing would fail here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

SERVICES = ("watchkeeper.decide", "watchkeeper.notify", "watchkeeper.watch")
RUNTIME = "watchkeeper.runtime"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("watchkeeper")


def test_no_service_module_imports_the_runtime(graph: grimp.ImportGraph) -> None:
    modules = {m for package in SERVICES for m in graph.find_descendants(package) | {package}}
    chains = {m: graph.find_shortest_chain(importer=m, imported=RUNTIME) for m in modules}
    assert {m: chain for m, chain in chains.items() if chain} == {}


def test_services_and_the_runtime_form_no_cycle(graph: grimp.ImportGraph) -> None:
    names = (*SERVICES, RUNTIME)
    both_ways = [
        (a, b)
        for a in names
        for b in names
        if a < b
        and graph.chain_exists(importer=a, imported=b, as_packages=True)
        and graph.chain_exists(importer=b, imported=a, as_packages=True)
    ]
    assert both_ways == []


def test_signing_is_shared_not_borrowed(graph: grimp.ImportGraph) -> None:
    webhook = "watchkeeper.notify.channels.webhook"
    assert not graph.chain_exists(importer=webhook, imported="watchkeeper.notify.ops")


ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "watchkeeper"
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(source_parent: Path) -> subprocess.CompletedProcess[str]:
    """The import contracts of pyproject.toml, checked on the package under ``source_parent``."""
    env = {**os.environ, "PYTHONPATH": str(source_parent)}
    return subprocess.run(
        [str(LINT), "--no-cache", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=source_parent,
        check=False,
    )


def test_the_import_contracts_hold() -> None:
    result = _lint(SOURCE.parent)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "bad_import"),
    [
        ("store/engine.py", "import watchkeeper.queue.service"),
        ("server/api/incidents.py", "import watchkeeper.store.incidents"),
        ("cli/app/queue.py", "import watchkeeper.runtime"),
        ("procs/witness.py", "import watchkeeper.kinds.process"),
    ],
)
def test_an_import_across_the_layers_breaks_a_contract(
    tmp_path: Path, module: str, bad_import: str
) -> None:
    copy = tmp_path / "watchkeeper"
    shutil.copytree(SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{bad_import}  # noqa\n")
    result = _lint(tmp_path)
    importer = "watchkeeper." + module.removesuffix(".py").replace("/", ".")
    assert result.returncode != 0
    assert f"{importer} -> {bad_import.removeprefix('import ')}" in result.stdout


def test_no_module_is_longer_than_five_hundred_lines() -> None:
    # The dashboard's scripts are modules too: they are split by job as the Python is.
    lengths = {
        str(path.relative_to(SOURCE)): len(path.read_text().splitlines())
        for pattern in ("*.py", "*.js")
        for path in SOURCE.rglob(pattern)
    }
    assert any(name.endswith("dashboard.js") for name in lengths)
    assert {name: n for name, n in lengths.items() if n > 500} == {}


def test_no_code_is_held_out_of_the_formatter() -> None:
    # Lines were once kept unformatted only to stay under the length cap; none is now.
    marker = "# fmt: " + "skip"
    held = [
        f"{path}:{number}"
        for folder in (SOURCE, ROOT / "tests")
        for path in folder.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if marker in line
    ]
    assert held == []
