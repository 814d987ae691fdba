"""The learner speed benchmark (benchmarks/learner_speed.py): its FLOP count on hand-made samples, and a run
on the tiny model checking the JSON it prints (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.learner_speed import executed_flop
from coplay.learn.distributed import lone_process_env
from coplay.types import Sample

REPO = Path(__file__).resolve().parents[2]
DIMS = {"hidden": 10, "layer_weights": 1000, "vocab": 100, "kv_weights": 200}


def _sample(prompt: list[int], completion: int) -> Sample:
    return Sample(adapter="act", adapter_version=0, prompt_ids=prompt, completion_ids=[1] * completion,
                  logprobs=[0.0] * completion, group_id="g", sample_id=str(prompt))


def test_the_flop_count_shares_the_prefix_per_micro_batch_and_its_trunk_once():
    system = list(range(100, 140))  # 40 shared tokens
    samples = [_sample(system + [k, k + 1], 3) for k in range(4)]  # prompts of 42 tokens
    flop = {arm: executed_flop(samples, 2, top=1, layers=3, arm=arm, dims=DIMS)
            for arm in ("old", "trunk", "prefix", "new")}
    # old: 4 rows x 45 columns through 3 layers forward + 1 backward, LM head on 4 columns per row
    old_layers = 4 * 45 * (2 * 1000 + 4 * 10 * 22.5) * 4
    assert flop["old"] == pytest.approx(old_layers + 4 * 10 * 100 * 4 * 4)
    # the split forward: the last layer's keys/values at all 45 columns, the rest of it at the 3 completion
    # columns (forward and backward: it is the adapted layer), the LM head on 3 columns
    last = 45 * 2 * 200 + 3 * (2 * 800 + 4 * 10 * 45)
    trunk = 4 * 45 * (2 * 1000 + 4 * 10 * 22.5) * 3 + 4 * last * 2
    assert flop["trunk"] == pytest.approx(trunk + 4 * 10 * 100 * 4 * 3)
    # sharing: each micro-batch runs 2 rows x 5 columns, and the 40-token prefix once through the adapted
    # layer (forward and backward); its trunk (2 layers) once in `new`, once per micro-batch in `prefix`
    assert flop["new"] < flop["prefix"] < flop["old"]
    per_prefix_token = 2 * 1000 + 2 * 10 * 40
    assert flop["prefix"] - flop["new"] == pytest.approx(40 * 2 * per_prefix_token)


@pytest.mark.slow
def test_a_run_on_the_tiny_model_prints_every_arm_with_ratios_and_shares(tmp_path):
    """The demo config's game (Candy Crush), both prompt layouts, float32 so the split forward's weights
    can be held to the unsplit one's."""
    out = tmp_path / "speed.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.learner_speed", "--samples", "4", "--micro-batch", "2",
         "--repeats", "1", "--arms", "old,new", "--peak-seconds", "0.1", "--dtype", "float32",
         "--set", "model.name=tiny", "--set", f"model.tiny.cache_dir={tmp_path / 'tiny'}", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=900, env=lone_process_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["command"].startswith("python -m benchmarks.learner_speed --samples 4")
    assert result["game"] == "candy_crush" and result["dtype"] == "float32"
    assert set(result["arms"]) == {"old/full", "new/full", "old/compact", "new/compact"}
    assert result["baseline"] == "old/full" and result["ratio_samples_per_s_vs_old"]["old/full"] == 1.0
    for fmt in ("full", "compact"):
        new = result["arms"][f"new/{fmt}"]
        assert new["prompt_format"] == fmt and new["frozen_trunk"] and new["share_prefix"]
        assert new["max_weight_difference_from_old"] < 1e-5  # against the same layout's old arm
        assert 0 < new["executed_share_of_peak"] and new["executed_gflop_per_step"] < \
            result["arms"][f"old/{fmt}"]["executed_gflop_per_step"]
    tokens = result["settings"]["prompt_formats"]
    assert tokens["compact"]["prompt_tokens"]["median"] < tokens["full"]["prompt_tokens"]["median"]
    assert tokens["compact"]["shared_prefix_tokens"] > 100  # the system turn


def test_the_flop_count_of_same_state_groups_computes_each_prompt_once():
    """Four answers at each of two positions: sharing cuts one micro-batch per position, so each whole
    prompt (less its last token) is computed once, not the system turn alone."""
    system = list(range(100, 140))
    samples = [_sample(system + [50 + p, 60 + p, 70 + p], 3) for p in range(2) for _ in range(4)]
    flop = {arm: executed_flop(samples, 8, top=1, layers=3, arm=arm, dims=DIMS) for arm in ("old", "new")}
    # new: per position 4 rows x (1 prompt token + 3 completion) columns through 3 layers + 1 backward
    rows = 2 * 4 * 4 * (2 * 1000 + 4 * 10 * (42 + 2)) * 4
    assert flop["new"] < flop["old"] / 3
    assert flop["new"] > rows


def test_arms_run_on_every_layout_or_on_the_one_they_name():
    from benchmarks.learner_speed import arm_names

    assert arm_names(["old", "new"], ["full"]) == [("old", "old", "full"), ("new", "new", "full")]
    assert [n for n, _, _ in arm_names(["old", "new"], ["full", "compact"])] == \
        ["old/full", "new/full", "old/compact", "new/compact"]
    assert arm_names(["old/full", "new/compact"], ["full", "compact"]) == \
        [("old/full", "old", "full"), ("new/compact", "new", "compact")]
