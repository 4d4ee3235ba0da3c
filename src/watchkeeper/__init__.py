"""watchkeeper: supervise long-running work by its progress."""

from __future__ import annotations

__version__ = "0.1.0"
