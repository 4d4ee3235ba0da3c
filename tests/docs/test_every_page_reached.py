"""Every page of docs/ is reached from the README, through its documentation list or a
page it links: a page no link leads to is a page no newcomer reads."""

from __future__ import annotations

import re
from pathlib import Path

from .examples import ROOT

#: A Markdown link's target, up to an anchor: ``[text](target#anchor)``.
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _linked_pages(page: Path) -> set[Path]:
    """The docs pages ``page`` links to, as paths."""
    targets = _LINK.findall(page.read_text(encoding="utf-8"))
    found = {(page.parent / target).resolve() for target in targets if target.endswith(".md")}
    return {path for path in found if path.parent == ROOT / "docs"}


def test_every_docs_page_is_reached_from_the_readme() -> None:
    reached: set[Path] = set()
    waiting = _linked_pages(ROOT / "README.md")
    while waiting:
        page = waiting.pop()
        if page in reached or not page.exists():
            continue
        reached.add(page)
        waiting |= _linked_pages(page)
    pages = set((ROOT / "docs").glob("*.md"))
    unreached = sorted(p.name for p in pages - reached)
    assert unreached == [], f"no link from the README leads to {unreached}"


def test_the_readme_lists_the_pages_a_newcomer_starts_from() -> None:
    listed = {p.name for p in _linked_pages(ROOT / "README.md")}
    for name in ("getting-started.md", "deploy.md", "supervision.md", "security.md"):
        assert name in listed, f"the README's documentation list leaves out docs/{name}"
