"""offload_tool.budget: limits from text and environment, per-run metering, nesting."""

import pytest

from offload_tool import budget
from offload_tool.errors import BudgetError, OffloadError, UsageError


def test_parse_limits_suffixes_and_defaults():
    lim = budget.parse_limits("decompressed=16G, entries=4M,depth=3,names=10K")
    assert (lim.decompressed, lim.entries, lim.depth, lim.names) == (16 << 30, 4 << 20, 3, 10 << 10)
    assert budget.parse_limits("") == budget.DEFAULT_LIMITS


@pytest.mark.parametrize("text", ["bogus=1", "decompressed", "decompressed=-1", "depth=0", "entries=1X",
                                  "names=99999999999999999999T"])
def test_parse_limits_rejects(text):
    with pytest.raises(UsageError, match="--budget"):
        budget.parse_limits(text)


def test_run_meters_across_charges_and_names_what():
    with budget.run(budget.Limits(entries=3)):
        budget.charge("entries", 2, "a")
        with pytest.raises(BudgetError) as exc:
            budget.charge("entries", 2, "bundle entry 'x'")
    msg = str(exc.value)
    assert "bundle entry 'x'" in msg and "entries budget of 3" in msg and "--budget=entries=N" in msg
    assert isinstance(exc.value, OffloadError)


def test_inner_run_joins_outer():
    with budget.run(budget.Limits(decompressed=100)):
        with budget.run():
            budget.charge("decompressed", 60, "a")
        assert budget.remaining("decompressed") == 40
        with pytest.raises(BudgetError, match="100 bytes"):
            budget.charge("decompressed", 41, "b")


def test_charge_outside_a_run_checks_alone(monkeypatch):
    monkeypatch.setenv(budget.ENV_VAR, "names=1K")
    budget.charge("names", 1024, "x")
    budget.charge("names", 1024, "x")  # no run: nothing accumulates
    with pytest.raises(BudgetError, match="1 KiB"):
        budget.charge("names", 1025, "x")


def test_environment_is_read_and_checked(monkeypatch):
    monkeypatch.setenv(budget.ENV_VAR, "depth=2")
    with budget.run() as lim:
        assert lim.depth == 2
        with budget.nested("a"), budget.nested("b"):
            with pytest.raises(BudgetError, match="depth budget of 2"):
                with budget.nested("c"):
                    pass
        with budget.nested("again"), budget.nested("fine"):
            pass
    monkeypatch.setenv(budget.ENV_VAR, "depth=lots")
    with pytest.raises(UsageError, match=budget.ENV_VAR):
        budget.limits()
