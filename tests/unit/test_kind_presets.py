"""Kind presets: the built-in kinds' budgets and which conditions each reports itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper import config
from watchkeeper.errors import ConfigError

#: What each preset promises: its budget, and the conditions the work alerts on by itself.
#: The run-supervision design names them: an X post's failure has its publication notice,
#: a memory task's its dead letter, and the research monitor reports crawls and research
#: sessions that stall.
EXPECTED = {
    "chat_turn": (600, ()),
    "swarm_task": (600, ()),
    "document_job": (600, ()),
    "research_session": (180, ("stalled",)),
    "crawl": (180, ("stalled",)),
    "memory_task": (300, ("failed",)),
    "x_post": (300, ("failed",)),
    "scheduled_job": (900, ("failed",)),
    "research_pipeline": (900, ()),
    "maintenance_sweep": (1800, ()),
}


def load(tmp_path: Path, text: str) -> config.Settings:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(text)
    return config.load(file)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_preset_is_a_built_in_kind_without_a_table(name: str) -> None:
    budget, reports = EXPECTED[name]
    settings = config.parse({}, "defaults")
    kind = settings.kind_configs()[name]
    assert kind.adapter == "push"
    assert settings.budget_for(name) == budget
    assert kind.reports == reports


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_table_naming_a_preset_starts_from_it(tmp_path: Path, name: str) -> None:
    budget, reports = EXPECTED[name]
    settings = load(tmp_path, f'[kinds.mine]\npreset = "{name}"\n')
    kind = settings.kind_configs()["mine"]
    assert (settings.budget_for("mine"), kind.reports, kind.adapter) == (budget, reports, "push")


def test_a_table_overrides_what_it_names_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        '[kinds.nightly]\npreset = "scheduled_job"\nbudget_s = 120\nexpected_s = 3600\n'
        '[kinds.loud]\npreset = "scheduled_job"\nreports = []\n'
        "[kinds.scheduled_job]\nbudget_s = 60\n",
    )
    kinds = settings.kind_configs()
    assert (settings.budget_for("nightly"), kinds["nightly"].expected_s) == (120, 3600)
    assert kinds["nightly"].reports == ("failed",)
    assert (settings.budget_for("loud"), kinds["loud"].reports) == (900, ())
    # A table named after a built-in kind changes that kind, starting from its preset.
    assert (settings.budget_for("scheduled_job"), kinds["scheduled_job"].reports) == (
        60,
        ("failed",),
    )


@pytest.mark.parametrize(
    ("name", "adapter"), [("task", "tasks"), ("program", "program"), ("process", "process")]
)
def test_a_table_for_a_kind_with_its_own_reader_keeps_that_reader(
    tmp_path: Path, name: str, adapter: str
) -> None:
    # `[kinds.task] budget_s = 60` made the queue's tasks a push kind: nothing read the
    # queue any more and every task went unjudged, without a word.
    settings = load(tmp_path, f"[kinds.{name}]\nbudget_s = 60\ntimeout_s = 30\n")
    kind = settings.kind_configs()[name]
    assert (kind.adapter, settings.budget_for(name), kind.timeout_s) == (adapter, 60, 30)


def test_reports_is_per_condition(tmp_path: Path) -> None:
    settings = load(tmp_path, '[kinds.feed]\nreports = ["failed", "stuck"]\n')
    kind = settings.kind_configs()["feed"]
    assert [kind.self_reports(c) for c in ("failed", "stuck", "stalled")] == [True, True, False]


def test_reports_itself_still_means_every_paged_condition(tmp_path: Path) -> None:
    kind = load(tmp_path, "[kinds.crawl]\nreports_itself = true\n").kind_configs()["crawl"]
    assert kind.reports == ("failed", "stuck", "stalled", "looping")
    assert kind.reports_itself


def test_a_bad_preset_name_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, '[kinds.nightly]\npreset = "schedule_job"\n')
    message = str(caught.value)
    assert "kinds.nightly" in message
    assert "'schedule_job' is not a preset" in message
    assert "choose one of: " + ", ".join(sorted(EXPECTED)) in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'reports = ["broken"]',
            "'broken' is not a condition: use failed, stuck, stalled or looping",
        ),
        ('reports = ["slow"]', "slow work is never paged"),
        ('reports = "failed"', 'must be a list of conditions, e.g. reports = ["failed"]'),
        (
            'reports_itself = true\nreports = ["failed"]',
            "set reports (the conditions the work reports itself) or reports_itself, not both",
        ),
    ],
)
def test_bad_reports_are_explained(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, f"[kinds.feed]\n{text}\n")
    assert "kinds.feed" in str(caught.value)
    assert expected in str(caught.value)
