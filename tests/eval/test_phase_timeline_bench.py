"""The before/after phase-timeline comparison (benchmarks/phase_timeline.py `--runs`) on two hand-made run
folders: the segments' seconds add up over the metrics lines, the ratios are before over after (the learner's
rate after over before), both GRPO steps' samples count toward the learner's rate, and a run without a
timeline is refused by name instead of compared as zeros."""

from __future__ import annotations

import json

import pytest

from benchmarks.phase_timeline import OLD_PATH, main
from coplay.config import load_config


def _phases(seconds: dict[str, float], busy: dict | None = None) -> dict:
    wall = sum(seconds.values())
    return {"seconds": seconds, "share": {k: v / wall for k, v in seconds.items()}, "wall_s": wall,
            "busy": busy or {}}


def _run(root, scale: float, learner_s: float) -> None:
    (root / "eval").mkdir(parents=True)
    (root / "config.yaml").write_text("run: {name: t}\n")
    lines = [
        {"iteration": 0, "cold_start": {}, "phases": _phases(
            {"startup_learner": 10.0 * scale, "cold_start_sft": 100.0 * scale},
            {"startup": {"engines_s": 20.0 * scale, "workers": 1}, "cold_start": {"sft_s": 100.0 * scale}})},
        {"iteration": 1, "generated_tokens": 50, "phases": _phases({"rollouts": 60.0 * scale})},
        {"iteration": 2, "generated_tokens": 70, "train": {"adapters": {"act": {"samples": 20.0},
                                                                         "retrieve": {"samples": 4.0}}},
         "phases": _phases({"rollouts": 30.0, "learner": learner_s},
                           {"learner": {"step_s": learner_s, "forward_s": learner_s / 2}})},
        {"iteration": 2, "final_train": {"adapters": {"act": {"samples": 24.0}}}},
        {"iteration": 3, "final_versions": {}, "phases": _phases({"checkpoint": 1.0})},
    ]
    (root / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    evaluation = {"results": {"candy_crush": {"score": {"mean": 5.0}}}}
    (root / "eval" / "it00002.json").write_text(json.dumps(evaluation))


def test_two_runs_are_compared_segment_by_segment(tmp_path):
    _run(tmp_path / "before", scale=2.0, learner_s=144.0)
    _run(tmp_path / "after", scale=1.0, learner_s=48.0)
    out = tmp_path / "out"
    assert main(["--runs", str(tmp_path / "before"), str(tmp_path / "after"), "--out", str(out),
                 "--name", "t"]) == 0
    result = json.loads((out / "t.json").read_text())
    before, after, ratios = result["arms"]["before"], result["arms"]["after"], result["ratios"]
    assert before["wall_s"] == 20 + 200 + 120 + 30 + 144 + 1
    assert ratios["segments"]["cold_start_sft"] == 2.0
    assert ratios["segments"]["rollouts"] == round(150 / 90, 3)
    assert ratios["segments"]["learner"] == 3.0
    # 48 samples over both steps (24 + 24), whatever adapter
    assert after["learner"]["samples"] == 48 and after["learner"]["samples_per_s"] == 1.0
    assert ratios["learner_samples_per_s"] == 3.0
    assert ratios["engine_start"] == 2.0 and after["generated_tokens"] == 120
    assert after["rulers"] == {}  # no evaluation of the config's games: nothing to set beside the bots
    table = (out / "t.md").read_text()
    assert "| learner | 144.0 |" in table and "3.00x" in table
    assert (out / "t.png").stat().st_size > 0


def test_a_run_without_a_timeline_is_refused(tmp_path):
    _run(tmp_path / "before", scale=1.0, learner_s=10.0)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.yaml").write_text("run: {name: t}\n")
    (bare / "metrics.jsonl").write_text(json.dumps({"iteration": 1}) + "\n")
    with pytest.raises(ValueError, match="no metrics line has `phases`"):
        main(["--runs", str(tmp_path / "before"), str(bare), "--out", str(tmp_path / "out")])


def test_the_old_path_overrides_name_real_settings():
    cfg = load_config("launch/configs/demo-candy_crush-smollm2.yaml", list(OLD_PATH))
    assert not cfg.learner.frozen_trunk and not cfg.learner.share_prefix
    assert not cfg.skill_bank.calls.concurrent
    assert cfg.engine.cpu_start == "vllm" and cfg.rollout.prompt_format == "full"
    default = load_config("launch/configs/demo-candy_crush-smollm2.yaml", [])
    assert default.learner.frozen_trunk and default.learner.share_prefix
    assert default.skill_bank.calls.concurrent
    assert default.engine.cpu_start == "lean" and default.rollout.prompt_format == "compact"
