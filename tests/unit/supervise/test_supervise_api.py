"""The public surface of watchkeeper.supervise, and its independence from the rest."""

from __future__ import annotations

import inspect
import subprocess
import sys

import watchkeeper.supervise as sv
from watchkeeper.errors import WatchkeeperError


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name, value in vars(sv).items()
        if not name.startswith("_") and not isinstance(value, type(sys))
    }
    public.discard("annotations")
    assert set(sv.__all__) == public
    assert len(set(sv.__all__)) == len(sv.__all__)


def test_every_public_class_and_function_is_documented() -> None:
    missing = [
        name
        for name in sv.__all__
        if inspect.isclass(obj := getattr(sv, name)) or inspect.isfunction(obj)
        if not (obj.__doc__ or "").strip()
    ]
    assert missing == []


def test_every_error_derives_from_the_package_root() -> None:
    errors = [getattr(sv, n) for n in sv.__all__ if n.endswith("Error") or n.endswith("Exceeded")]
    assert errors
    assert all(issubclass(e, sv.SuperviseError) for e in errors)
    assert issubclass(sv.SuperviseError, WatchkeeperError)  # the project's one root


def test_importing_it_pulls_in_no_other_watchkeeper_package_but_the_leaves() -> None:
    code = (
        "import sys, watchkeeper.supervise; "
        "print(sorted(m for m in sys.modules if m.startswith('watchkeeper.') "
        "and not m.startswith('watchkeeper.supervise')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    # Only the leaves it builds on: the errors root, the clock and the backoff it shares.
    leaves = ["watchkeeper.backoff", "watchkeeper.clock", "watchkeeper.errors"]
    assert out.stdout.strip() == str(leaves)
    assert "sqlalchemy" not in out.stderr
