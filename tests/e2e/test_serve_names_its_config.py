"""The install's pages name the configuration file ``serve --config`` read, where it rules."""

from __future__ import annotations

from pathlib import Path

from .test_serve_supervision import _login, serve


def test_the_settings_pages_name_the_file_given_with_config(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "ours.toml"
    config.parent.mkdir()
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    with serve(config) as served:
        web, _csrf = _login(served)
        try:
            for path in ("/web/settings", "/web/integrations", "/web/onboarding"):
                page = web.get(path)
                assert page.status_code == 200, path
                assert str(config.resolve()) in page.text, path
        finally:
            web.close()
