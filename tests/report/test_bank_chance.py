"""Issue 41 item 7: the bank's quality figures beside their chance levels. A bank whose contracts say
something (skills A and B of tests/skills/synthetic.py: `x↑`, `y↓`, ...) beats the same contracts on random
windows; the same bank with every contract cut down to `score↑`, which rises in every window, passes held-out
segments 100% of the time and random windows 100% of the time, the demo's figures: the report and
`coplay bank show` must mark that, per bank and per skill."""

from __future__ import annotations

import copy

import pytest

from coplay.config import SkillBankConfig
from coplay.report.bank import bank_report_html, show_bank
from coplay.report.chance import NOT_ABOVE, VersusChance, heldout_vs_chance, quality_vs_chance
from coplay.runs import RunDir
from coplay.skills import Bank, update_bank
from coplay.skills.heldout import evaluate_on_trajectories
from coplay.skills.schema import save_bank
from tests.skills.synthetic import shard

CFG = SkillBankConfig()


@pytest.fixture(scope="module")
def banks() -> tuple[Bank, Bank]:
    """(informative, at chance): a bank learned from the synthetic behaviours, and a copy whose contracts are
    only `score↑`, re-measured on fresh held-out trajectories as an update measures its banks."""
    good, _, _ = update_bank(Bank("2048"), shard(8), None, CFG, iteration=1)
    blind = copy.deepcopy(good)
    for skill in blind.skills.values():
        skill.contract.add, skill.contract.dele = ["score↑"], []
        skill.contract.support = {"score↑": 1.0}
    held = evaluate_on_trajectories(blind, shard(6, first_seed=100), CFG, shuffle_seed=1)
    blind.version, blind.iteration = good.version + 1, 2
    blind.metrics = {**held.summary(), "per_skill_heldout": held.per_skill}
    return good, blind


def test_every_rate_comes_with_its_chance_level_and_the_counts_behind_both(banks):
    good, _ = banks
    per_skill = good.metrics["per_skill_heldout"]
    assert per_skill and all({"shuffled_pass_rate", "shuffled_draws", "n", "passes"} <= set(e)
                             for e in per_skill.values())
    draws = good.metrics["shuffled_draws"]
    assert draws == sum(e["shuffled_draws"] for e in per_skill.values()) > 0
    pooled = sum(e["shuffled_pass_rate"] * e["shuffled_draws"] for e in per_skill.values()) / draws
    assert good.metrics["shuffled_pass_rate"] == pytest.approx(pooled, abs=1e-4)
    assert good.metrics["heldout_labelled"] == sum(e["n"] for e in per_skill.values())


def test_an_informative_bank_beats_chance_and_a_blind_one_is_flagged(banks):
    good, blind = banks
    assert heldout_vs_chance(good.metrics).beats is True
    at_chance = heldout_vs_chance(blind.metrics)
    assert at_chance.rate == 1.0 and at_chance.chance == 1.0 and at_chance.beats is False
    assert at_chance.text() == f"100% of {at_chance.n} (chance 100%: {NOT_ABOVE})"
    quality, chance_quality = quality_vs_chance(blind.metrics)
    assert chance_quality == pytest.approx(quality)  # at chance, the quality is what random windows give


def test_a_high_rate_on_few_segments_does_not_count_as_beating_chance():
    """3 of 3 beside a chance level of 60%: the 95% interval of 3/3 reaches down to 44%, so not shown."""
    assert VersusChance(1.0, 0.6, n=3, passes=3).beats is False
    assert VersusChance(1.0, 0.6, n=40, passes=40).beats is True
    assert VersusChance(0.9, None).text() == "90% (no chance level)"


def test_report_and_bank_show_put_chance_beside_each_figure_and_flag_the_blind_bank(banks, tmp_path):
    good, blind = banks
    flag = f": {NOT_ABOVE})"
    run = RunDir.create(tmp_path, "chance", "{}")
    save_bank(run, good)
    shown = " ".join(show_bank(run.root).split())  # the table folds long cells over lines
    assert f"100% of {good.metrics['heldout_labelled']} (chance 46%)" in shown and flag not in shown
    assert "contract held out" in shown and "no chance level is measured" in shown
    save_bank(run, blind)
    shown = " ".join(show_bank(run.root).split())
    assert f"100% of {blind.metrics['heldout_labelled']} (chance 100%{flag}" in shown
    assert shown.count(flag) == 1 + len(blind.skills)  # the bank and each skill
    page = bank_report_html(run.root, analysis=False)
    assert "class='problem'" in page and "this check cannot tell this bank" in page
    assert page.count(flag) == 1 + len(blind.skills) and "(no chance level measured)" in page
    assert "chance (shuffled)" in page  # the pass-rate chart's chance line
