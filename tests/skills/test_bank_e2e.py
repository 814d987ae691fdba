"""End to end on expert-bot trajectories of 2048, Tetris and Avalon: five bank updates (deterministic
policy), then the final banks measured on fresh held-out seeds.

Must show, per bank: >= 3 skills with >= 2 contract literals each; held-out pass rate >= 70% and >= 20 points
above the same contracts on randomly placed segments of the same lengths; the share of steps covered.
Run with `-s` to see the figures (one JSON line per bank).
"""

from __future__ import annotations

import json

import pytest

from coplay.config import SkillBankConfig
from coplay.skills import Bank, bank_key_for, update_bank
from coplay.skills.heldout import evaluate_on_trajectories

UPDATES = 5
EPISODES = {"2048": 8, "tetris": 8, "avalon": 10}  # per update (Avalon: 5 seats each)
HELDOUT_EPISODES = {"2048": 6, "tetris": 6, "avalon": 20}
HELDOUT_SEED = 10_000


def _by_key(trajectories):
    out = {}
    for t in trajectories:
        out.setdefault(bank_key_for(t.game, t.seat, t.role), []).append(t)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("game", ["2048", "tetris", "avalon"])
def test_bank_from_expert_trajectories(game):
    from coplay.rollout.bot_episodes import play_bot_episodes

    cfg = SkillBankConfig()
    banks: dict[str, Bank] = {}
    for it in range(1, UPDATES + 1):
        seeds = list(range(it * 100, it * 100 + EPISODES[game]))
        for key, trajs in sorted(_by_key(play_bot_episodes(game, "expert", seeds)).items()):
            banks[key], _, report = update_bank(banks.get(key, Bank(key)), trajs, None, cfg, it)
            assert report["version"] == it
    held = _by_key(play_bot_episodes(game, "expert",
                                     list(range(HELDOUT_SEED, HELDOUT_SEED + HELDOUT_EPISODES[game]))))
    assert sorted(held) == sorted(banks)
    for key, bank in sorted(banks.items()):
        ev = evaluate_on_trajectories(bank, held[key], cfg, shuffle_seed=0)
        figures = {"bank": key, "skills": len(bank.skills),
                   "literals": sorted(len(s.contract.literals) for s in bank.skills.values()), **ev.summary()}
        print(json.dumps(figures))
        good = [s for s in bank.skills.values() if len(s.contract.literals) >= 2]
        assert len(good) >= 3, figures
        assert ev.pass_rate >= 0.7, figures
        assert ev.pass_rate - ev.shuffled_pass_rate >= 0.2, figures
        assert ev.coverage >= 0.5, figures
