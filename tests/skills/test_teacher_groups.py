"""More bank-adapter teacher data from more expert episodes: one seed-bank build saturates at a handful of
skills (2048: 12 contract and 8 curator examples from 48 episodes), so `sft.bank_example_groups` adds builds
over disjoint slices of the episodes. The seed bank the run starts from must not change."""

from __future__ import annotations

from collections import Counter

from coplay.config import CoplayConfig
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank
from coplay.skills.teacher import seed_bank

EPISODES = play_bot_episodes("2048", "expert", list(range(24)), 60)


def _build(groups: int) -> tuple[Bank, Counter]:
    bank, examples = seed_bank(Bank(bank_key="2048"), EPISODES, CoplayConfig().skill_bank,
                               example_groups=groups)
    return bank, Counter(adapter for adapter, _, _ in examples)


def test_groups_add_contract_and_curator_examples_and_leave_the_seed_bank_alone():
    one_bank, one = _build(1)
    grouped_bank, grouped = _build(4)
    assert grouped_bank.to_bytes() == one_bank.to_bytes()
    assert grouped["contract"] > one["contract"] and grouped["curator"] > one["curator"]


def test_grouped_curator_examples_carry_both_verdicts():
    _, examples = seed_bank(Bank(bank_key="2048"), EPISODES, CoplayConfig().skill_bank, example_groups=4)
    verdicts = Counter(answer for adapter, _, answer in examples if adapter == "curator")
    assert set(verdicts) == {"VERDICT: APPROVE", "VERDICT: REJECT"}, verdicts
