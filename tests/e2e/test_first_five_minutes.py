"""``init``, ``test-card`` and ``doctor``, run as a user runs them, against the platform fakes."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from watchkeeper import config
from watchkeeper.cli.app.testcard import TEXT

from ..integration.fakes.discord import FakeDiscord, fake_discord
from ..integration.fakes.slack import FakeSlack, fake_slack
from ..integration.fakes.telegram import FakeTelegram, fake_telegram
from ..support.cli import wk as run_wk
from ..support.live_server import free_port
from ..support.serving import serving

TELEGRAM_CHAT = -1001234567890
ENVS = {
    "telegram": "WATCHKEEPER_TELEGRAM_TOKEN",
    "discord": "WATCHKEEPER_DISCORD_TOKEN",
    "slack": "WATCHKEEPER_SLACK_TOKEN",
}


@dataclass
class Fakes:
    telegram: FakeTelegram
    discord: FakeDiscord
    slack: FakeSlack

    def chat(self, platform: str) -> str:
        chats = {
            "telegram": f"telegram:{TELEGRAM_CHAT}",
            "discord": f"discord:{FakeDiscord.CHAT}",
            "slack": f"slack:{FakeSlack.CHAT}",
        }
        return chats[platform]

    def url(self, platform: str) -> str:
        fake: FakeTelegram | FakeDiscord | FakeSlack = getattr(self, platform)
        return fake.url

    def env(self, **wrong: str) -> dict[str, str]:
        """Every platform's good token in its variable, but those named in ``wrong``."""
        tokens = {
            "telegram": self.telegram.token,
            "discord": self.discord.token,
            "slack": self.slack.token,
        }
        return {ENVS[name]: wrong.get(name, token) for name, token in tokens.items()}

    def cards(self, platform: str) -> list[str]:
        """The texts of the messages the fake holds in the test chat."""
        if platform == "telegram":
            return [m.text for m in self.telegram.messages(TELEGRAM_CHAT)]
        if platform == "discord":
            return [m.content for m in self.discord.in_channel(FakeDiscord.CHAT)]
        return [m.shown for m in self.slack.in_channel(FakeSlack.CHAT)]


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    with ExitStack() as stack:
        yield Fakes(
            stack.enter_context(fake_telegram()),
            stack.enter_context(fake_discord()),
            stack.enter_context(fake_slack()),
        )


def init_args(fakes: Fakes, path: Path, platforms: tuple[str, ...]) -> list[str]:
    args = ["init", "--path", str(path)]
    for platform in platforms:
        args += ["--platform", platform, "--chat", fakes.chat(platform)]
        args += ["--api", f"{platform}={fakes.url(platform)}"]
    return args


PLATFORMS = ("telegram", "discord", "slack")


def wk(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The CLI in a terminal wide enough that no table cell is folded onto two lines."""
    return run_wk(*args, columns=1000, **kwargs)


def test_init_writes_a_commented_file_checks_it_and_the_card_arrives_everywhere(
    fakes: Fakes, tmp_path: Path
) -> None:
    path = tmp_path / "watchkeeper.toml"
    done = wk(*init_args(fakes, path, PLATFORMS), env=fakes.env(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    text = path.read_text()
    assert text.count("\n# ") >= 10, "the file explains itself"
    settings = config.load(path)
    assert settings.ops.channels == ["log", *(fakes.chat(p) for p in PLATFORMS)]
    assert settings.telegram.bot_token_env == ENVS["telegram"]
    assert "bot_token =" not in text, "tokens stay in the environment"
    assert "bot @watchkeeper_test_bot" in done.stdout
    for platform in PLATFORMS:
        assert fakes.cards(platform) == [TEXT], platform
    assert fakes.telegram.invalid == fakes.discord.invalid == fakes.slack.invalid == []
    # No webhook set at Telegram: a warning (cards arrive; buttons would not), not a failure.
    assert "no webhook set" in done.stdout


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_bad_token_fails_naming_the_check_the_variable_and_the_fix(
    fakes: Fakes, tmp_path: Path, platform: str
) -> None:
    path = tmp_path / "watchkeeper.toml"
    done = wk(
        *init_args(fakes, path, (platform,)), env=fakes.env(**{platform: "wrong-1"}), cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{platform} token" in done.stdout
    assert f"{platform} refused the token" in done.stdout
    assert f"the variable {ENVS[platform]} must hold" in done.stdout
    assert "Traceback" not in done.stderr
    assert fakes.cards(platform) == [], "no card is tried with a refused token"
    assert path.is_file(), "the file is written even so, to be fixed in place"


def test_an_unset_token_variable_says_what_to_export(fakes: Fakes, tmp_path: Path) -> None:
    path = tmp_path / "watchkeeper.toml"
    env = {k: v for k, v in fakes.env().items() if k != ENVS["slack"]}
    done = wk(*init_args(fakes, path, ("slack",)), env={**env, ENVS["slack"]: ""}, cwd=tmp_path)
    assert done.returncode == 1
    assert f"names the environment variable {ENVS['slack']}, which is not set" in done.stdout


def test_init_never_overwrites_without_force(fakes: Fakes, tmp_path: Path) -> None:
    path = tmp_path / "watchkeeper.toml"
    path.write_text("# mine\n")
    refused = wk(*init_args(fakes, path, ("telegram",)), env=fakes.env(), cwd=tmp_path)
    assert refused.returncode == 1
    assert "already exists: pass --force" in refused.stderr
    assert path.read_text() == "# mine\n"
    forced = wk(*init_args(fakes, path, ("telegram",)), "--force", env=fakes.env(), cwd=tmp_path)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "[telegram]" in path.read_text()


def test_bad_options_are_explained(tmp_path: Path) -> None:
    done = wk("init", "--platform", "teams", "--path", str(tmp_path / "w.toml"))
    assert done.returncode == 1
    assert "--platform 'teams': choose telegram, discord or slack" in done.stderr
    done = wk("init", "--chat", "telegram", "--path", str(tmp_path / "w.toml"))
    assert "--chat 'telegram': write PLATFORM:CHAT[/THREAD]" in done.stderr
    assert not (tmp_path / "w.toml").exists()


def test_telegram_failing_to_reach_the_webhook_fails_the_check(
    fakes: Fakes, tmp_path: Path
) -> None:
    fakes.telegram.webhook_url = "https://watch.example.com/webhooks/telegram"
    fakes.telegram.webhook_error = "Connection timed out"
    done = wk(*init_args(fakes, tmp_path / "w.toml", ("telegram",)), env=fakes.env(), cwd=tmp_path)
    assert done.returncode == 1
    assert "Telegram cannot deliver to" in done.stdout and "Connection timed out" in done.stdout


def test_test_card_alone_posts_and_names_a_chat_it_cannot_reach(
    fakes: Fakes, tmp_path: Path
) -> None:
    path = tmp_path / "watchkeeper.toml"
    written = wk(
        *init_args(fakes, path, ("telegram", "slack")), "--no-check", env=fakes.env(), cwd=tmp_path
    )
    assert written.returncode == 0, written.stderr
    assert fakes.cards("telegram") == [], "--no-check sends nothing"
    sent = wk("--config", str(path), "test-card", env=fakes.env())
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert fakes.cards("telegram") == [TEXT] and fakes.cards("slack") == [TEXT]
    fakes.telegram.missing.add(TELEGRAM_CHAT)
    failed = wk("--config", str(path), "test-card", env=fakes.env())
    assert failed.returncode == 1
    assert "chat not found" in failed.stdout and "bot is a member" in failed.stdout
    nowhere = wk("--config", str(path), "test-card", "--chat", "discord:1", env=fakes.env())
    assert nowhere.returncode == 1 and "[discord] has no bot token" in nowhere.stdout


def test_doctor_without_a_server_fails_and_says_how_to_start_one(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = wk("doctor", "--server", url, cwd=tmp_path, env={"WATCHKEEPER_CONFIG": ""})
    assert done.returncode == 1
    assert f"no server answers at {url}" in done.stdout
    assert "watchkeeper serve" in done.stdout


def test_doctor_checks_a_running_install(
    fakes: Fakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # serve checks the token's variable at start, and inherits this process's environment.
    monkeypatch.setenv(ENVS["telegram"], fakes.telegram.token)
    path = tmp_path / "watchkeeper.toml"
    written = wk(
        *init_args(fakes, path, ("telegram",)), "--no-check", env=fakes.env(), cwd=tmp_path
    )
    assert written.returncode == 0, written.stderr
    # A port of its own, and sweeps every second, so that the sweeper is seen working.
    path.write_text(
        path.read_text()
        .replace("port = 8750", f"port = {free_port()}")
        .replace('data_dir = ".watchkeeper"', 'data_dir = "data"\ncheck_interval_s = 1')
    )
    with serving(path) as (process, url, token):
        ok = wk("--config", str(path), "doctor", "--server", url, "--token", token, env=fakes.env())
        refused = wk(
            "--config", str(path), "doctor", "--server", url, "--token", "wk_bad", env=fakes.env()
        )
        bad_chat = wk(
            "--config",
            str(path),
            "doctor",
            "--server",
            url,
            "--token",
            token,
            env=fakes.env(telegram="wrong-2"),
        )
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for seen in (
        "healthy",
        "the server reads its database",
        "accepted",
        "0 alive",
        "bot @watchkeeper_test_bot",
    ):
        assert seen in ok.stdout, seen
    assert refused.returncode == 1 and "the server refused it (HTTP 401)" in refused.stdout
    assert bad_chat.returncode == 1 and "telegram refused the token" in bad_chat.stdout
