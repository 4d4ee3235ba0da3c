"""The generated references in docs/ match the configuration model and the CLI they describe."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = ".venv/bin/python tools/gen_docs.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_docs", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["configuration.md", "cli.md"])
def test_generated_section_matches_the_code(page: str) -> None:
    gen = _generator()
    path = ROOT / "docs" / page
    written = path.read_text(encoding="utf-8")
    expected = gen.render_page(page, written)
    assert written == expected, (
        f"docs/{page} is out of date with the code it documents: run `{REGENERATE}` "
        "and commit the result"
    )


def test_every_configuration_key_is_in_the_reference() -> None:
    section = _generator().config_reference()
    for key in (
        "channels",
        "reports_itself",
        "[telegram]",
        "[discord]",
        "[slack]",
        "[queue]",
        "[orgs.NAME]",
        '[prices."PROVIDER/MODEL"]',
        "[forge]",
        "[records]",
        "webhook_secret",
        "linear_argv",
        "key_env",
        "lease_s",
        "long_waits_total",
    ):
        assert key in section, f"{key} is missing from the configuration reference"


def test_every_command_is_in_the_cli_reference() -> None:
    section = _generator().cli_reference()
    for command in ("serve", "runs", "report start", "verify-record", "silence add", "task"):
        assert f"`watchkeeper {command}" in section
    assert "--server" in section and "WATCHKEEPER_URL" in section


def test_a_field_without_a_description_is_refused() -> None:
    from pydantic import BaseModel

    class Bare(BaseModel):
        undocumented: int = 1

    with pytest.raises(ValueError, match=r"undocumented.*description="):
        _generator().table_rows(Bare)


def _commands_named_in_docs() -> set[tuple[str, str]]:
    """``(page, command)`` for every ``watchkeeper COMMAND`` written as code in the docs."""
    named = set()
    code = re.compile(r"`([^`\n]+)`|^```(?:sh|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
    call = re.compile(
        r"(?:^|[\s$(])(?:\.venv/bin/)?watchkeeper((?:\s+-[-\w]+(?:\s+[\w./]+)?)*)"
        r"\s+([a-z][a-z-]*)\b"
    )
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for match in code.finditer(page.read_text(encoding="utf-8")):
            for line in (match.group(1) or match.group(2) or "").splitlines():
                for found in call.finditer(line):
                    named.add((page.name, found.group(2)))
    return named


def test_every_command_the_docs_name_exists() -> None:
    import typer

    from watchkeeper.cli.app import app

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    missing = sorted(
        f"{page}: watchkeeper {name}"
        for page, name in _commands_named_in_docs()
        if name not in commands
    )
    assert not missing, "the docs name commands that do not exist:\n" + "\n".join(missing)


def test_no_page_promises_for_later_what_exists() -> None:
    # Both shipped: the queue's resume and interrupted marker, and admins acting over the API.
    assert "## Not here yet" not in (ROOT / "docs" / "timeline.md").read_text(encoding="utf-8")
    assert "later, acts on incidents" not in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_the_presets_table_says_what_the_presets_are() -> None:
    from watchkeeper.config.presets import PRESETS

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| (\d+) \| `\[[^]]*\]` \|", text, re.MULTILINE))
    listed = {name: float(budget) for name, budget in rows.items() if name in PRESETS}
    assert listed == {name: preset.budget_s for name, preset in PRESETS.items()}, (
        "the presets table in docs/configuration.md differs from config/presets.py"
    )
