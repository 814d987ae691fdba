"""Teacher `act` examples carry `SKILL: SWITCH` where the expert leaves one skill for another, so the decision
agent's switch rule (and the reward's switch penalty) is in use from the cold start."""

from __future__ import annotations

import coplay_envs
from coplay.agent.parsing import parse_act
from coplay.config import CoplayConfig
from coplay.learn.teacher import bank_labels, expert_examples
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, update_bank
from coplay.skills.teacher import TeacherCaller
from coplay.skills.update import segment_with_bank

SEEDS = [0, 1, 2]
MAX_STEPS = 60


def _seed_bank(cfg: CoplayConfig) -> Bank:
    trajectories = play_bot_episodes("2048", "expert", SEEDS, MAX_STEPS)
    seed_cfg = cfg.skill_bank.with_values({"use_model": True})  # the deterministic teacher answers
    bank, _, _ = update_bank(Bank(bank_key="2048"), trajectories, TeacherCaller(), seed_cfg, 0)
    assert len(bank.skills) >= 2, "the deterministic bank must find at least two skills to switch between"
    return bank


def test_expert_examples_switch_exactly_where_the_segment_label_changes():
    cfg = CoplayConfig()
    bank = _seed_bank(cfg)
    examples = expert_examples("2048", SEEDS, coplay_envs.rules("2048"), 2, MAX_STEPS,
                               bank_labels({"2048": bank}, cfg.skill_bank), top_k=3)
    acts = [e for e in examples if e.adapter == "act"]
    switches = [e for e in acts if "\nSKILL: SWITCH\n" in e.completion]
    assert switches, "no teacher example switches skill"
    for example in acts:
        legal = example.messages[-1]["content"].split("Legal actions:\n", 1)[-1].split("\n\n")[0].splitlines()
        parsed = parse_act(example.completion, legal)
        assert parsed.action and not parsed.error, (example.completion, parsed.error)
        assert parsed.skill_directive in ("", "SWITCH")
    # as many switches as label changes between consecutive segments whose first skill was shown
    expected = 0
    for traj in play_bot_episodes("2048", "expert", SEEDS, MAX_STEPS):
        labels = [seg.label for seg in segment_with_bank(bank, traj, cfg.skill_bank)]
        expected += sum(a != b for a, b in zip(labels, labels[1:], strict=False))
    assert 0 < len(switches) <= expected
