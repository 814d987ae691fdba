"""A 2048 run of 10 learner steps (issue 18, the bounded serving set): no rollout worker ever holds more
adapter versions than `engine.max_loras`, none holds a frozen `act` version (a single-player game has no
model opponents), and the evaluations in between do not make the next iteration load old versions again."""

from __future__ import annotations

import pytest

from coplay.config import load_config
from coplay.loop import train
from coplay.runs import RunDir
from tests.helpers import REPO


@pytest.mark.slow
def test_ten_learner_steps_stay_within_the_lora_slots_and_serve_no_frozen_version(ray_cluster, tmp_path,
                                                                                tiny_model_config):
    cfg = load_config(REPO / "launch/configs/tiny-2048.yaml", [
        f"run.out_dir={tmp_path}", f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}",
        "loop.iterations=10", "loop.staleness=0", "loop.checkpoint_every=5", "eval.every=3",
        "eval.episodes=2", "rollout.max_steps=4", "logging.console=false"])
    run = RunDir.open(train(cfg))
    lines = [r for r in run.read_metrics() if "serving" in r]
    assert [r["iteration"] for r in lines] == list(range(1, 11))
    assert lines[-1]["train"]["learner_step"] == 10
    for line in lines:
        assert 0 < line["serving"]["adapters_held"] <= cfg.engine.max_loras, line["serving"]
        assert line["serving"]["frozen_held"] == 0, line["serving"]
    # current + previous of each of the five adapters at most: evaluation left nothing older behind
    assert max(r["serving"]["adapters_held"] for r in lines) <= 2 * len(cfg.active_adapters)
