"""The loop with `curriculum.enabled` on the tiny model (slow): the sixth adapter is published, served and
trained, every proposer answer gets a counted verdict per iteration, and usage persists in the run folder."""

from __future__ import annotations

import json

import pytest

from coplay.config import load_config
from coplay.loop import train
from coplay.runs import RunDir
from tests.helpers import DEMO_CONFIG, tiny_loop_overrides


@pytest.mark.slow
@pytest.mark.parametrize("ablation", [[], ["curriculum.unguided=true", "curriculum.freeze=[bank, propose]",
                                           "curriculum.exploration_share=0.0"]])
def test_one_iteration_with_the_curriculum(ray_cluster, tmp_path, tiny_model_config, ablation):
    overrides = [*ablation, *tiny_loop_overrides(str(tmp_path), tiny_model_config.tiny.cache_dir),
                 "sft.enabled=false",
                 "loop.iterations=1", "loop.staleness=0", "rollout.start_states=1", "rollout.group_size=2",
                 "curriculum.enabled=true", "curriculum.prompts=2", "curriculum.proposals=2",
                 "curriculum.attempts=2", "sampling.max_tokens.propose=64"]
    run = RunDir.open(train(load_config(DEMO_CONFIG, overrides)))
    assert list(run.root.glob("adapters/propose/v*/manifest.json"))  # published like the other five
    summary = json.loads((run.root / "curriculum" / "it1.json").read_text())["2048"]
    assert summary["proposed"] == 4
    assert summary["proposed"] * summary["valid_rate"] + sum(summary["rejected"].values()) >= 4
    line = next(r for r in run.read_metrics() if r.get("iteration") == 1 and "train" in r)
    assert "propose" in line["versions"]  # the rollouts and the curriculum ran at a served propose version
    assert (run.root / "curriculum" / "tasking.json").is_file()
    assert (run.root / "curriculum" / "frozen_banks.json").is_file() == bool(ablation)
