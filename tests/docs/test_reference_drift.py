"""The generated references in docs/ match the configuration model and the CLI they describe."""

from __future__ import annotations

import importlib.util
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
