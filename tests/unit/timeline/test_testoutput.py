"""Test output is summarized, never kept: counts, failing tests, the first assertion."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.timeline import testoutput

SAMPLES = Path(__file__).parent / "samples"


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["pytest.txt", "pytest_quiet.txt"])
def test_pytest_output(name: str) -> None:
    summary = testoutput.summarize(_sample(name))
    assert summary == (
        "3 failed, 1 error, 1 passed, 1 skipped; failed: test_demo.py::test_math, "
        "test_demo.py::TestThing::test_name, test_demo.py::test_boom, test_demo.py::test_err; "
        "first assertion: assert (1 + 1) == 3"
    )


def test_unittest_output() -> None:
    assert testoutput.summarize(_sample("unittest.txt")) == (
        "1 failed, 1 error, 1 passed, 1 skipped; failed: test_unit.Cases.test_raises, "
        "test_unit.Cases.test_equal; first assertion: AssertionError: 1 != 2"
    )


def test_jest_output() -> None:
    assert testoutput.summarize(_sample("jest.txt")) == (
        "2 failed, 4 passed, 1 skipped; failed: sum \u203a adds 2 + 2 to equal 5, "
        "parse \u203a reads an empty string; "
        "first assertion: expect(received).toBe(expected) // Object.is equality"
    )


def test_a_green_run_is_its_counts() -> None:
    assert testoutput.summarize("..........\n10 passed in 0.12s\n") == "10 passed"
    assert testoutput.summarize("Ran 3 tests in 0.001s\n\nOK\n") == "3 passed"


def test_failing_names_are_capped() -> None:
    lines = [f"FAILED tests/t.py::test_{i} - assert 0" for i in range(50)]
    summary = testoutput.summarize("\n".join([*lines, "50 failed in 1.00s"]))
    assert summary is not None
    assert "test_19," not in summary and "test_19 (+30 more)" in summary
    assert "test_20" not in summary


def test_nothing_personal_survives_the_assertion_line() -> None:
    text = "E       assert 'bob@example.com' == '5500 0000 0000 0004'\n1 failed in 0.1s"
    summary = testoutput.summarize(text)
    assert summary is not None
    assert "bob@example.com" not in summary and "5500 0000 0000 0004" not in summary
    assert summary.startswith("1 failed; first assertion: assert ")
    kept = testoutput.summarize("E   assert 1733059200123 == 0\n1 failed in 0.1s")
    assert kept is not None and kept.endswith("assert 1733059200123 == 0")  # not a card number


@pytest.mark.parametrize(
    "text",
    [
        "3 failed, 120 passed in 2.1s",
        "FAILED tests/a.py::test_x - assert 1 == 2",
        "Traceback ...\nAssertionError: nope",
        "===== test session starts =====",
        "Tests:       1 failed, 2 total",
        "Ran 5 tests in 0.2s",
    ],
)
def test_what_looks_like_test_output(text: str) -> None:
    assert testoutput.looks_like(text)


@pytest.mark.parametrize(
    "text", ["chose the smaller diff", "retry after 3 failures of the network", ""]
)
def test_what_does_not(text: str) -> None:
    assert not testoutput.looks_like(text)
    assert testoutput.summarize(text) is None


def test_unrecognized_output_is_described_not_kept() -> None:
    assert testoutput.describe("some runner\nwith its own\nformat") == (
        "test output not recognized (3 lines)"
    )


# -- go test, cargo test and the rest (samples printed by the real tools) ----------------------


def test_go_test_verbose_output() -> None:
    assert testoutput.summarize(_sample("go_verbose.txt")) == (
        "3 failed, 3 passed, 1 skipped; failed: TestSub, TestTable, TestTable/two; "
        "first assertion: calc_test.go:12: contact [email] card [card]"
    )


def test_go_test_output_without_v_counts_packages() -> None:
    assert testoutput.summarize(_sample("go_quiet.txt")) == (
        "3 failed, 1 package failed, 1 package ok; failed: TestSub, TestTable, TestTable/two; "
        "first assertion: calc_test.go:12: contact [email] card [card]"
    )


def test_cargo_test_output_sums_every_test_binary() -> None:
    summary = testoutput.summarize(_sample("cargo.txt"))
    assert summary is not None
    assert summary.startswith("2 failed, 3 passed, 1 skipped; failed: tests::fails, tests::panics")
    assert "no counts" not in summary
    assert "alice@example.com" not in summary and "hunter2hunter2" not in summary


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        (
            "TAP version 13\nok 1 - adds\nnot ok 2 - subtracts\nok 3 - skips # SKIP later\n1..3\n",
            "1 failed, 1 passed, 1 skipped; failed: subtracts",
        ),
        (
            "  calc\n    \u2713 adds\n    1) subtracts\n\n  1 passing (5ms)\n  1 failing\n",
            "1 failed, 1 passed; failed: subtracts",
        ),
        (
            "[INFO] Results:\n[ERROR] Failures:\n[ERROR]   CalcTest.subtracts:12 expected 0\n"
            "[ERROR] Tests run: 4, Failures: 1, Errors: 0, Skipped: 1\n",
            "1 failed, 2 passed, 1 skipped",
        ),
    ],
    ids=["tap", "mocha", "surefire"],
)
def test_other_runners_are_counted(text: str, summary: str) -> None:
    assert testoutput.summarize(text) == summary


def test_test_like_output_no_runner_reads_is_its_length() -> None:
    text = "PASS check a\nPASS check b\nFAIL check c for bob@example.com\n"
    assert testoutput.summarize(text) == "test output not recognized (3 lines)"
    assert testoutput.is_test_output(text, verify=False)


def test_one_line_of_prose_is_no_test_output() -> None:
    assert not testoutput.is_test_output("the review passed, ship it", verify=False)
    assert not testoutput.is_test_output("tests ran", verify=True)
    assert testoutput.is_test_output("ran\nthe\nsuite", verify=True)
