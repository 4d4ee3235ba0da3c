"""Route modules reach services, never a store: no ``.store`` is read in them.

The import contract (``tests/unit/test_layering.py``) keeps ``watchkeeper.store`` out of
``server/``'s imports; a store can still be reached through a service's attribute
(``queue.store.output(...)``), which no import shows. This walks every route and page
module's syntax tree for such a read, and for any import of the store at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "src" / "watchkeeper" / "server"
#: What builds the app and watches its parts is not a route: it is handed the runtime.
NOT_ROUTES = {"app.py", "deps.py", "supervision.py", "health.py"}
ROUTE_MODULES = sorted(
    path
    for path in SERVER.rglob("*.py")
    if path.name not in NOT_ROUTES and "__pycache__" not in path.parts
)


def test_the_walk_finds_the_route_modules() -> None:
    names = {str(path.relative_to(SERVER)) for path in ROUTE_MODULES}
    assert {"api/runs.py", "api/queue.py", "web/routes_jobs.py", "webhooks/forge.py"} <= names


@pytest.mark.parametrize("path", ROUTE_MODULES, ids=lambda path: str(path.relative_to(SERVER)))
def test_no_route_module_reads_a_store(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reads = [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr == "store")
        or (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "getattr"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "store"
        )
    ]
    assert reads == [], f"a route reaches a store; ask a service instead: {reads}"


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module is not None:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


@pytest.mark.parametrize("path", ROUTE_MODULES, ids=lambda path: str(path.relative_to(SERVER)))
def test_no_route_module_imports_the_store(path: Path) -> None:
    # Even under TYPE_CHECKING or inside a function, where the import contract's
    # indirect-import allowance would not look.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        f"{path.name}:{node.lineno} {name}"
        for node in ast.walk(tree)
        for name in _imported(node)
        if name == "watchkeeper.store" or name.startswith("watchkeeper.store.")
    ]
    assert found == [], f"a route imports the store; ask a service instead: {found}"
