"""The SmolLM2 throughput benchmark (benchmarks/smollm2_throughput.py): its summaries and ratios on hand-made
child results, the grouped LoRA ops against vLLM's, and a `--quick` run on the tiny model (matmul peak, LoRA
op costs, LoRA placement) checking the JSON it prints."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.smollm2_throughput import FLOP_PER_FORWARD_TOKEN, derive, shared_prefix

REPO = Path(__file__).resolve().parents[2]
PEAK = {"float32": 100.0, "bfloat16": 300.0}


def child_result(seconds: dict[str, float], generated: int = 100, prompt_tokens: int = 900) -> dict:
    """A child's JSON: a warm-up set (slow, ignored) and two timed sets per arm."""
    return {"startup_s": 30.0, "grouped_lora_applied": False,
            "runs": {arm: [{"seconds": 60.0, "generated": generated, "prompt_tokens": prompt_tokens,
                            "tokens_sha": "a"}] + [{"seconds": s, "generated": generated,
                                                    "prompt_tokens": prompt_tokens, "tokens_sha": "a"}] * 2
                     for arm, s in seconds.items()}}


def test_derive_gives_each_ratio_from_the_timed_sets_and_shares_of_the_peak():
    out = {"engines": {"vllm_prefix_on": child_result({"base": 2.0, "lora": 8.0}),
                       "vllm_prefix_off": child_result({"base": 5.0}),
                       "hf": child_result({"base": 10.0})},
           "lora_vllm": {"raw_vllm": child_result({"base": 1.0, "lora": 4.0}),
                         "raw_vllm_grouped": child_result({"base": 1.0, "lora": 1.25})}}
    derived = derive(out, PEAK)
    r = derived["ratios"]
    assert r["vllm_over_hf"] == pytest.approx(2.0)
    assert r["vllm_prefix_on_over_off"] == pytest.approx(2.5)
    assert r["coplay_vllm_lora_over_base"] == pytest.approx(0.25)
    assert r["raw_vllm_lora_over_base"] == pytest.approx(0.25)
    assert r["raw_vllm_grouped_lora_over_base"] == pytest.approx(0.8)
    assert r["grouped_over_shipped_lora"] == pytest.approx(3.2)
    assert r["raw_vllm_base_over_coplay_base"] == pytest.approx(2.0)
    base = derived["engines"]["hf"]["base"]
    assert base["forward_tokens_per_s"] == pytest.approx(100.0)  # (900 + 100) / 10 s
    assert base["share_of_peak"]["float32"] == pytest.approx(100.0 * FLOP_PER_FORWARD_TOKEN / 100e9)
    assert derived["lora_vllm"]["grouped_tokens_equal_shipped"] is True


def test_coplays_engine_with_each_kind_of_lora_op_gives_its_own_ratios():
    out = {"lora_engine": {"coplay_vllm_ops": child_result({"base": 4.0, "lora": 5.0}),
                           "coplay_grouped": child_result({"base": 2.0, "lora": 2.0})}}
    derived = derive(out, PEAK)
    r = derived["ratios"]
    assert r["coplay_vllm_ops_lora_over_base"] == pytest.approx(0.8)
    assert r["coplay_grouped_lora_over_base"] == pytest.approx(1.0)
    assert r["coplay_grouped_over_vllm_ops_lora"] == pytest.approx(2.5)
    assert derived["lora_engine"]["grouped_tokens_equal_vllm_ops"] is True


def test_a_failed_child_leaves_its_ratios_none_and_keeps_its_error():
    out = {"engines": {"vllm_prefix_on": {"error": "exit 1"}, "vllm_prefix_off": child_result({"base": 5.0}),
                       "hf": child_result({"base": 10.0})}}
    derived = derive(out, PEAK)
    assert derived["ratios"]["vllm_prefix_on_over_off"] is None
    assert derived["ratios"]["vllm_over_hf"] == pytest.approx(2.0)
    assert "vllm_prefix_on_over_off" not in derived["headline"]
    assert derived["engines"]["vllm_prefix_on"] == {"error": "exit 1"}


def test_shared_prefix_counts_the_common_opening():
    assert shared_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert shared_prefix([[7, 8], [7, 8, 9]]) == 2


def test_quick_run_prints_the_peak_the_lora_op_costs_and_the_placement(monkeypatch):
    # as after an in-process Learner (earlier tests): torchrun variables naming a port that is taken
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                            "MASTER_PORT": str(held.getsockname()[1])}.items():
            monkeypatch.setenv(name, value)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.smollm2_throughput", "--quick",
                               "--parts", "lora_ops,placement"], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["model"] == "tiny" and out["command"].endswith("--parts lora_ops,placement")
    assert set(out["peak"]["gflops"]) == {"float32", "bfloat16"}
    assert all(g > 0 for g in out["peak"]["gflops"].values())
    assert {"tokens", "rank", "threads", "vllm_lora_over_base", "grouped_lora_over_base"} <= set(
        out["lora_ops"][0])
    assert "placements" in out["placement"], out["placement"]
    placements = out["placement"]["placements"]
    assert set(placements) == {"top1", "all"}
    assert set(placements["all"]["share_of_peak"]) == {"float32", "bfloat16"}
    assert {"ops_vllm_lora_over_base_prefill", "placement_top_over_all"} <= set(out["headline"])
    assert "engines" not in out and "learner" not in out


def test_the_reserved_cpu_arm_is_compared_with_the_shipped_raw_engine():
    out = {"lora_vllm": {"raw_vllm": child_result({"base": 2.0, "lora": 8.0}),
                         "raw_vllm_grouped": child_result({"base": 2.0, "lora": 2.5})},
           "vllm_threads": {"raw_vllm_reserved_0": child_result({"base": 1.0, "lora": 8.0})}}
    r = derive(out, PEAK)["ratios"]
    assert r["raw_vllm_reserved_0_over_default_base"] == pytest.approx(2.0)
    assert r["raw_vllm_reserved_0_over_default_lora"] == pytest.approx(1.0)


def test_a_childs_indented_json_is_found_after_its_libraries_lines():
    from benchmarks.smollm2_throughput import last_json_object

    noisy = '[INFO] a library line\n{not json\n{\n "placements": {\n  "all": 1\n }\n}\n'
    assert last_json_object(noisy) == {"placements": {"all": 1}}
    assert last_json_object('{"a": 1}\n{"b": 2}\n') == {"b": 2}
    assert last_json_object("no json here\n") is None
