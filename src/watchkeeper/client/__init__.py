"""The Python SDK: :class:`Client` and its parts, each part a module of its own.

``from watchkeeper.client import Client`` (or ``from watchkeeper import Client``) is the
SDK. Importing the package itself loads nothing heavy, so the command line's fast paths
use :mod:`watchkeeper.client.wire` and :mod:`watchkeeper.client.locate` without paying
for httpx; the client is loaded on first use of its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Client", "RunContext"]

if TYPE_CHECKING:
    from watchkeeper.client.core import Client, RunContext


def __getattr__(name: str) -> Any:
    if name in __all__:
        from watchkeeper.client import core

        return getattr(core, name)
    raise AttributeError(f"module 'watchkeeper.client' has no attribute {name!r}")
