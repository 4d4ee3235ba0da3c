"""The store loads nothing of the timeline package: its events are a leaf record module.

Each check runs in a fresh interpreter, so the order in which modules were
imported earlier in the test session cannot hide a cycle.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

LOADED = (
    "import sys, {module}; "
    "print(' '.join(sorted(m for m in sys.modules if m.startswith('watchkeeper.timeline'))))"
)


def _timeline_modules_after(module: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", LOADED.format(module=module)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_the_store_loads_nothing_of_the_timeline_package() -> None:
    loaded = _timeline_modules_after("watchkeeper.store.timeline")
    assert loaded == []


@pytest.mark.parametrize("module", ["watchkeeper.timeline.service", "watchkeeper.timeline.forge"])
def test_a_timeline_service_imports_first_in_a_fresh_interpreter(module: str) -> None:
    assert module in _timeline_modules_after(module)
