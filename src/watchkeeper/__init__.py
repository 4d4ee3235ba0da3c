"""watchkeeper: supervise long-running work by its progress.

The SDK is ``from watchkeeper import Client``; it is imported lazily so the
command line starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Client", "__version__"]

if TYPE_CHECKING:
    from watchkeeper.client import Client


def __getattr__(name: str) -> Any:
    if name == "Client":
        from watchkeeper.client import Client

        return Client
    raise AttributeError(f"module 'watchkeeper' has no attribute {name!r}")
