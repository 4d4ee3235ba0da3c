"""A bad configuration ends with one clear message naming key, value and expectation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from watchkeeper import config
from watchkeeper.errors import ConfigError


def test_defaults_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.CONFIG_ENV, raising=False)
    monkeypatch.delenv(config.DATABASE_URL_ENV, raising=False)
    settings = config.load(None)
    assert settings.data_dir == Path(".watchkeeper")
    assert settings.resolved_database_url == "sqlite:///.watchkeeper/watchkeeper.db"
    assert settings.check_interval_s == 30
    assert settings.down_after_s == 300
    assert settings.budget_for("chat_turn") == 600
    assert settings.budget_for("crawl") == 180
    assert settings.budget_for("research_session") == 180
    assert settings.budget_for("anything_else") == 600


def test_kind_tables_override_defaults_and_keep_adapter_options(tmp_path: Path) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        'data_dir = "state"\n'
        "[kinds.crawl]\nbudget_s = 45\nexpected_s = 900\n"
        '[kinds.builds]\nadapter = "sql"\nurl = "sqlite:///x.db"\nquery = "SELECT 1"\n'
    )
    settings = config.load(file)
    assert settings.data_dir == tmp_path / "state"
    assert settings.budget_for("crawl") == 45
    kinds = settings.kind_configs()
    assert kinds["builds"].adapter == "sql"
    assert kinds["builds"].options == {"url": "sqlite:///x.db", "query": "SELECT 1"}
    assert "chat_turn" in kinds


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("check_interval_s = -3\n", "check_interval_s = -3: Input should be greater than 0"),
        ("chek_interval_s = 3\n", "unknown key 'chek_interval_s'"),
        # A misspelt secret's key is named with the advice: no value to hide in that line.
        (
            "[forge]\ngithub_token_envv = 'X'\n",
            "unknown key 'forge.github_token_envv': remove it or check its spelling",
        ),
        ("[telegram]\nbot_token_env = 3\n", "telegram.bot_token_env = 3: Input should be"),
        ('database_url = "mysql://u:hunter2@h/db"\n', "database_url = 'mysql://u:[redacted]@h"),
        ("[kinds.crawl]\nbudget_s = 'soon'\n", "kinds.crawl.budget_s = 'soon'"),
        ('database_url = "mysql://x"\n', "database_url = 'mysql://x': must be a SQLAlchemy URL"),
        ('[ops]\nwebhook_url = "ftp://x"\n', "ops.webhook_url = 'ftp://x': must be an http"),
        ("[kinds.Bad-Name]\n", "kind name 'Bad-Name' must be lowercase"),
        ("check_interval_s = \n", "not valid TOML"),
    ],
)
def test_bad_files_are_explained(tmp_path: Path, text: str, expected: str) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config.load(file)
    assert expected in str(caught.value)
    assert str(file) in str(caught.value)


def test_missing_file_is_explained(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        config.load(tmp_path / "nope.toml")


def test_cli_exits_2_with_one_message_and_starts_nothing(tmp_path: Path) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(f'data_dir = "{tmp_path / "data"}"\ndown_after_s = "never"\n')
    result = subprocess.run(
        [sys.executable, "-m", "watchkeeper", "--config", str(file), "serve", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "down_after_s = 'never'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_unknown_adapter_is_a_config_error(tmp_path: Path) -> None:
    from watchkeeper.kinds import registry
    from watchkeeper.kinds.base import AdapterContext

    settings = config.parse({"kinds": {"crawl": {"adapter": "carrier_pigeon"}}})
    with pytest.raises(
        ConfigError, match=r"kinds\.crawl\.adapter = 'carrier_pigeon': no such adapter"
    ):
        registry.build(settings, AdapterContext(settings, None))


def test_sql_adapter_options_are_checked_at_load(tmp_path: Path) -> None:
    from watchkeeper.kinds import registry
    from watchkeeper.kinds.base import AdapterContext

    settings = config.parse(
        {"kinds": {"builds": {"adapter": "sql", "url": "sqlite:///x.db", "query": "DELETE FROM t"}}}
    )
    with pytest.raises(
        ConfigError, match=r"kinds\.builds\.query = 'DELETE FROM t': must be a single SELECT"
    ):
        registry.build(settings, AdapterContext(settings, None))
    missing = config.parse({"kinds": {"builds": {"adapter": "sql"}}})
    with pytest.raises(ConfigError, match=r"kinds\.builds\.url is required"):
        registry.build(missing, AdapterContext(missing, None))


# -- secrets: checked at load, never echoed ---------------------------------------------------

_SECRET_VALUE = "s3cr3t VALUE/with spaces+plus"


@pytest.mark.parametrize(
    ("text", "key", "advice"),
    [
        (
            f'[telegram]\nwebhook_secret = "{_SECRET_VALUE}"\n',
            "telegram.webhook_secret",
            "A-Z, a-z, 0-9, _ and -",
        ),
        (f'[discord]\npublic_key = "{_SECRET_VALUE}"\n', "discord.public_key", "64 hex"),
        (
            f'[discord]\npublic_key = "{"ab" * 31}zz"\n',
            "discord.public_key",
            "64 hex",
        ),
        (f'[slack]\nsigning_secret = "{_SECRET_VALUE}"\n', "slack.signing_secret", "hex"),
        ('[telegram]\nwebhook_secret = ""\n', "telegram.webhook_secret", "1 to 256"),
        (f'[telegram]\nwebhook_secret = "{"a" * 257}"\n', "telegram.webhook_secret", "1 to 256"),
    ],
)
def test_malformed_secrets_are_refused_at_load_without_echoing_them(
    tmp_path: Path, text: str, key: str, advice: str
) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config.load(file)
    message = str(caught.value)
    assert key in message and advice in message, message
    assert "s3cr3t" not in message and "ab" * 31 not in message and "a" * 20 not in message


@pytest.mark.parametrize(
    "text",
    [
        "[telegram]\nbot_token = 123456789\n",
        "[ops]\nwebhook_secret = 987654321\n",
        "[slack]\nsigning_secret = 55555555555\n",
        "[forge]\ngithub_secret = 424242424242\n",
        "[kinds.crawl.actions.cancel]\nurl = 'https://x'\nauth_header = 777777777777\n",
    ],
)
def test_a_secret_of_the_wrong_type_is_named_but_not_shown(tmp_path: Path, text: str) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config.load(file)
    message = str(caught.value)
    digits = text.split("= ")[-1].strip()
    assert digits not in message, message
    assert "(hidden)" in message


def test_valid_secrets_load() -> None:
    settings = config.parse(
        {
            "telegram": {"webhook_secret": "Abc_123-xyz"},
            "discord": {"public_key": "0123456789abcdefABCDEF" + "0" * 42},
            "slack": {"signing_secret": "8f742231b10e8888abcd99aaabbb85a5"},
        }
    )
    assert settings.telegram.webhook_secret == "Abc_123-xyz"


def test_a_database_url_password_is_not_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text('database_url = "mysql://app:hunter2hunter2@db/app"\n')
    with pytest.raises(ConfigError) as caught:
        config.load(file)
    assert "database_url" in str(caught.value) and "hunter2" not in str(caught.value)
    monkeypatch.setenv(config.DATABASE_URL_ENV, "postgresql://app:hunter2hunter2@db/app")
    with pytest.raises(ConfigError) as from_env:
        config.parse({}, "env")
    assert "psycopg" in str(from_env.value) and "hunter2" not in str(from_env.value)


def test_cli_names_the_bad_secret_without_its_value_or_a_traceback(tmp_path: Path) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[discord]\npublic_key = "{_SECRET_VALUE}"\n'
        '[telegram]\nwebhook_secret = "has spaces, not allowed"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "watchkeeper", "--config", str(file), "serve", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "discord.public_key" in result.stderr and "telegram.webhook_secret" in result.stderr
    assert "s3cr3t" not in result.stderr + result.stdout
    assert "has spaces" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_serve_refuses_a_bad_secret_from_the_environment_by_its_variable(tmp_path: Path) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[slack]\nsigning_secret_env = "WK_TEST_SLACK_SIGNING"\n'
    )
    bad = "not-hex-s3cr3t-value"
    result = subprocess.run(
        [sys.executable, "-m", "watchkeeper", "--config", str(file), "serve", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "WK_TEST_SLACK_SIGNING": bad},
    )
    assert result.returncode == 2
    assert "WK_TEST_SLACK_SIGNING" in result.stderr and "hex" in result.stderr
    assert bad not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_serve_refuses_a_missing_secret_variable(tmp_path: Path) -> None:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[forge]\ngithub_secret_env = "WK_TEST_UNSET_VAR"\n'
    )
    environment = {k: v for k, v in os.environ.items() if k != "WK_TEST_UNSET_VAR"}
    result = subprocess.run(
        [sys.executable, "-m", "watchkeeper", "--config", str(file), "serve", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environment,
    )
    assert result.returncode == 2
    assert "forge.github_secret_env" in result.stderr and "not set" in result.stderr
    assert "Traceback" not in result.stderr
