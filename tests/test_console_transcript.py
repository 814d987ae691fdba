"""`benchmarks/console_transcript.py`: the line counts by source and the longest silence that the demo's
transcript reports, so a console that fills with vLLM's lines or goes quiet for minutes shows in figures."""

from __future__ import annotations

from benchmarks.console_transcript import longest_silence, source_of, summarize


def test_lines_are_told_apart_by_the_format_each_library_logs_in():
    assert source_of("INFO 12-06 09:00:01 [loader.py:12] Loading weights took 0.3 s") == ("vllm", False)
    assert source_of("(RolloutWorkerImpl pid=412) WARNING 12-06 09:00:01 [lora.py:3] x") == ("vllm", True)
    colored = "\x1b[36m(RolloutWorkerImpl pid=8)\x1b[0m (MainProcess pid=8) WARNING 12-06 10:19:49 [c.py:2] x"
    assert source_of(colored) == ("vllm", True)
    ray_line = "2026-12-06 09:00:00,123\tINFO worker.py:1821 -- Started a local Ray instance."
    assert source_of(ray_line)[0] == "ray"
    assert source_of("/x/y.py:3: FutureWarning: `a` is deprecated")[0] == "python warning"
    ds_line = "(LearnerRankImpl pid=7) [2026-12-06] [INFO] [real_accelerator.py:2] cpu"
    assert source_of(ds_line)[0] == "deepspeed"
    assert source_of("WARNING: Location 'file:///opt/x/' is ignored")[0] == "make/pip"  # pip's own style
    assert source_of("iteration 1: rollouts: done in 41.2 s") == ("coplay", False)
    assert source_of("start-up: learner (1 ranks, deepspeed): done in 9.3 s")[0] == "coplay"
    assert source_of("WARNING: Location 'file:///opt/pypi/simple/deepspeed/' is ignored")[0] == "make/pip"
    torch_line = "(RolloutWorkerImpl pid=9) [W1206 12:28:49.518102627 utils.cpp:68] Warning: NUMA binding: x"
    assert source_of(torch_line) == ("torch", True)


def test_the_longest_silence_names_the_lines_around_it():
    lines = [(0.5, "start"), (1.0, "model: smollm2"), (41.0, "cold start: done in 40.0 s"), (42.0, "end")]
    silence = longest_silence(lines, [0.5, 1.0, 41.0, 42.0], wall=43.0)
    assert silence == {"seconds": 40.0, "from_s": 1.0, "line_before": "model: smollm2",
                       "line_after": "cold start: done in 40.0 s"}


def test_the_summary_counts_the_demo_apart_from_the_install_and_keeps_the_final_lines():
    lines = [(0.0, "Collecting torch"), (1.0, ".venv/bin/coplay demo"),
             (2.0, "INFO 12-06 09:00:01 [a.py:1] x"),
             (3.0, "iteration 1: rollouts: done in 1.0 s"), (4.0, "run folder:   runs/demo"),
             (5.0, "demo finished in 5 s")]
    result = summarize(lines, [t for t, _ in lines], 0, 6.0, ["make", "demo"], "abc1234")
    assert result["by_source"] == {"make/pip": 2, "coplay": 3, "vllm": 1}
    assert result["after_install"]["lines"] == 4 and result["after_install"]["coplay_share"] == 0.75
    assert result["final_summary"] == ["run folder:   runs/demo", "demo finished in 5 s"]


def test_the_rulers_block_puts_each_score_beside_the_bots_on_the_same_protocol(tmp_path):
    """A demo's evaluations and probes in the transcript JSON as figures, each with the random and expert
    bots played on the same seeds or positions and the protocol check, never a score alone."""
    import json

    from benchmarks.console_transcript import rulers

    run = tmp_path / "runs" / "demo-1"
    (run / "eval").mkdir(parents=True)
    check = {"passed": True, "games": {"candy_crush": {
        "passed": True, "reason": "r", "random": {"mean": 66.4, "ci95": [39.3, 93.5], "n": 8},
        "expert": {"mean": 193.1, "ci95": [145.8, 240.4], "n": 8}}}}
    for it, mean in ((0, 50.2), (2, 57.8)):
        vs = {"candy_crush": {"random": {}}}
        body = {"meta": {"iteration": it, "protocol_check": check, "vs_bots": vs},
                "results": {"candy_crush": {"episodes": 8, "score": {"mean": mean, "ci_low": 1.0,
                                                                     "ci_high": 2.0, "n": 8},
                                            "per_seed": {"1000000": mean}}}}
        (run / "eval" / f"it{it:05d}.json").write_text(json.dumps(body))
        regret = {"mean_regret": 24.0 + it, "regret": {"ci_low": 19.0, "ci_high": 29.0}, "n": 16}
        probe = {"meta": {"iteration": it}, "results": {"candy_crush": {
            "model": regret, "random": {**regret, "mean_regret": 25.35},
            "expert": {**regret, "mean_regret": 8.04}, "bots_separate": True}}}
        (run / "eval" / f"probe-it{it:05d}.json").write_text(json.dumps(probe))
    block = rulers(run)
    first, last = block["evaluations"]
    assert (first["iteration"], last["iteration"]) == (0, 2)
    game = last["games"]["candy_crush"]
    assert game["score"]["mean"] == 57.8 and game["bots"]["random"]["mean"] == 66.4
    assert game["bots"]["expert"]["mean"] == 193.1 and game["protocol_check_passed"] is True
    probe = block["probes"][-1]["games"]["candy_crush"]
    regrets = [probe[who]["mean_regret"] for who in ("model", "random", "expert")]
    assert regrets == [26.0, 25.35, 8.04] and probe["bots_separate"]
    assert rulers(tmp_path / "nothing") is None
