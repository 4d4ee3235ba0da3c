"""The code examples of docs/*.md and README.md, as a reader would copy them.

Every fenced ``python``, ``sh`` and ``toml`` block is an example that must work as
written (``ts`` blocks are type-checked against the Node SDK by
tests/packaging/test_node_sdk.py). A block that cannot run here says why in an HTML
comment on the line before it, which readers of the rendered page never see::

    <!-- example: skip needs a real Telegram bot -->

Examples talk to the default local server with a token shown as ``wk_...``; the
tests run them against a live server of their own, so both are replaced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("python", "sh", "toml")
DEFAULT_URL = "http://127.0.0.1:8750"
TOKEN_PLACEHOLDER = "wk_..."

_FENCE = re.compile(r"^(\s*)```(\w+)\s*$")
_MARKER = re.compile(r"^<!--\s*example:\s*(\w+)\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Example:
    """One fenced block: where it is, its language, its text and whether and why it is skipped."""

    page: str
    line: int
    language: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    def for_server(self, url: str, token: str) -> str:
        """The code aimed at the server at ``url`` with ``token`` instead of the default ones."""
        return self.code.replace(DEFAULT_URL, url).replace(TOKEN_PLACEHOLDER, token)


def pages() -> list[Path]:
    """Every page whose examples are tested."""
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def examples(path: Path, languages: tuple[str, ...] = LANGUAGES) -> list[Example]:
    """The blocks of one page in ``languages`` (python, sh and toml), in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        indent, language = fence.groups()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        if language in languages:
            # A block inside a list item is indented with it; the reader copies it without.
            body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
            found.append(
                Example(
                    page=str(path.relative_to(ROOT)),
                    line=index + 1,
                    language=language,
                    code="\n".join(body) + "\n",
                    skip=_skip_reason(lines, index, path),
                )
            )
        index = end + 1
    return found


def _skip_reason(lines: list[str], fence: int, path: Path) -> str | None:
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    marker = _MARKER.match(lines[before].strip()) if before >= 0 else None
    if marker is None:
        return None
    verb, reason = marker.groups()
    if verb != "skip" or not reason:
        raise ValueError(
            f"{path.name}:{before + 1}: write <!-- example: skip WHY --> (a reason is required)"
        )
    return reason


def all_examples() -> list[Example]:
    """Every example of every page."""
    return [example for page in pages() for example in examples(page)]
