"""The newest schema revision this package ships, told by its migration files' names.

Read without Alembic or SQLAlchemy, so the commands that start processes can tell
whether a store is current before they load either.
"""

from __future__ import annotations

import re
from pathlib import Path

VERSIONS = Path(__file__).parent / "migrations" / "versions"


def shipped_head() -> str | None:
    """The newest ``NNNN_name.py`` revision shipped; ``None`` if the names do not say."""
    names = [p.name for p in VERSIONS.glob("*.py") if p.name != "__init__.py"]
    found = [re.match(r"^(\d{4})_\w+\.py$", name) for name in names]
    if not found or not all(found):
        return None
    return max(match.group(1) for match in found if match)
