"""The demo's closing summary (`coplay demo`): the run's last evaluation next to the random and expert bots
on the same protocol, so a user reads the score against something."""

from __future__ import annotations

import json

from coplay.config import load_config
from coplay.driver.demo import DEMO_CONFIG, bots_beside_run
from coplay.eval.protocol import write_eval
from coplay.eval.stats import summarize


def test_the_closing_table_puts_the_run_beside_both_bots_on_the_same_protocol(tmp_path):
    cfg = load_config(DEMO_CONFIG, ["eval.episodes=3"])
    assert bots_beside_run(tmp_path, cfg) == []  # no evaluation: nothing to compare
    run_score = summarize([20.0, 24.0, 37.0]).as_dict()
    write_eval(tmp_path / "eval", "it00004", {"2048": {"episodes": 3, "score": run_score}}, {"iteration": 4})
    lines = bots_beside_run(tmp_path, cfg)
    moves = cfg.eval.max_steps or cfg.rollout.max_steps
    assert lines[0] == f"evaluation on 2048: 3 episodes on seeds.eval, {moves} moves, mean score [95% CI]"
    assert "the run's adapters (iteration 4)" in lines[1]
    assert f"{run_score['mean']:9.1f}  [{run_score['ci_low']:.1f}, {run_score['ci_high']:.1f}]" in lines[1]
    assert lines[2].lstrip().startswith("random bot") and lines[3].lstrip().startswith("expert bot")
    for bot in ("random", "expert"):
        saved = json.loads((tmp_path / "eval" / f"bots-{bot}.json").read_text())
        assert saved["meta"]["player"] == bot and saved["results"]["2048"]["episodes"] == 3
    expert = json.loads((tmp_path / "eval" / "bots-expert.json").read_text())["results"]["2048"]["score"]
    assert f"{expert['mean']:9.1f}" in lines[3]
