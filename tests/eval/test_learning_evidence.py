"""The learning table's probe and time columns (benchmarks/learning_evidence.py): the run's first and last
probes beside the bots, their change paired over the same positions, and wall time split into training and
measuring from the phase timeline."""

from __future__ import annotations

import json

from benchmarks.learning_evidence import probe_evidence, probe_markdown, probe_summary, time_split


def _score(regrets: list[float]) -> dict:
    mean = sum(regrets) / len(regrets)
    return {"mean_regret": mean, "n": len(regrets), "best_share": 0.0, "invalid_share": 0.0,
            "regret": {"ci_low": mean - 1.0, "ci_high": mean + 1.0}, "regrets": regrets}


def _probe(root, iteration: int, model: list[float], separate: bool = True) -> None:
    body = {"meta": {"iteration": iteration},
            "results": {"candy_crush": {"model": _score(model), "random": _score([20.0, 22.0, 24.0, 26.0]),
                                        "expert": _score([5.0, 6.0, 5.0, 6.0]), "bots_separate": separate,
                                        "action_spread": {"collapsed": False}}}}
    (root / "eval").mkdir(exist_ok=True)
    (root / "eval" / f"probe-it{iteration:05d}.json").write_text(json.dumps(body))


def test_the_last_probe_minus_the_first_is_paired_over_the_positions(tmp_path):
    _probe(tmp_path, 0, [30.0, 28.0, 26.0, 24.0])
    _probe(tmp_path, 4, [25.0, 20.0, 21.0, 20.0])
    _probe(tmp_path, 8, [20.0, 18.0, 17.0, 15.0])
    p = probe_evidence(tmp_path, "candy_crush")
    assert (p["first_iteration"], p["last_iteration"]) == (0, 8)
    d = p["paired_last_minus_first"]
    assert d["difference"] == -9.5 and d["n"] == 4 and d["ci_high"] < 0
    assert p["bots"]["expert"]["mean"] == 5.5 and p["bots_separate"]
    run = {"game": "candy_crush", "variant": "grpo_no_bank", "probe": p,
           "time_split": time_split({"wall_s": 100.0, "seconds": {"evaluation": 40.0, "learner": 60.0}})}
    assert run["time_split"] == {"wall_s": 100.0, "measuring_s": 40.0, "training_s": 60.0}
    text = "\n".join(probe_markdown([run]))
    assert ("| candy_crush | grpo_no_bank | 4 | 27.00 [26.00, 28.00] (0) | 17.50 [16.50, 18.50] (8) "
            "| -9.50 [-10.42, -8.58] |") in text
    assert "| 100 | 60 | 40 |" in text
    assert "a gain was measured" in probe_summary([run])[0]


def test_a_probe_whose_bots_do_not_separate_is_not_a_result(tmp_path):
    _probe(tmp_path, 0, [30.0, 28.0, 26.0, 24.0], separate=False)
    _probe(tmp_path, 8, [20.0, 18.0, 17.0, 15.0], separate=False)
    run = {"game": "candy_crush", "variant": "grpo_no_bank", "probe": probe_evidence(tmp_path, "candy_crush")}
    assert "not a result" in probe_summary([run])[0] and "not a result" in "\n".join(probe_markdown([run]))
    assert probe_evidence(tmp_path, "2048") is None and time_split(None) is None


def test_arms_are_compared_paired_over_seeds_and_probe_positions(tmp_path):
    from benchmarks.learning_evidence import compare_arms, compare_markdown

    def arm(name: str, scores: list[float], regrets: list[float], cold_shift: float = 0.0) -> dict:
        root = tmp_path / name
        root.mkdir()
        _probe(root, 0, [30.0 - cold_shift, 28.0, 26.0, 24.0])
        _probe(root, 8, regrets)
        cold = {"iteration": 0, "per_seed": {"1": 10.0 + cold_shift, "2": 20.0, "3": 30.0}}
        final = {"iteration": 8, "mean": sum(scores) / 3, "ci_low": 0.0, "ci_high": 50.0, "n": 3,
                 "per_seed": dict(zip(("1", "2", "3"), scores, strict=True))}
        return {"game": "candy_crush", "run_dir": str(root), "curve": [cold, final], "final": final,
                "probe": probe_evidence(root, "candy_crush"), "protocol_check": {"passed": True}}

    result = compare_arms({"state": arm("s", [12.0, 23.0, 31.0], [20.0, 18.0, 17.0, 15.0]),
                           "episode": arm("e", [11.0, 21.0, 30.0], [21.0, 19.0, 18.0, 16.0], 3.0)})
    assert result["arms"]["state"]["eval_minus_cold_start"]["difference"] == 2.0
    versus = result["versus_first"]["episode minus state"]
    assert versus["eval"]["difference"] == -4 / 3 and versus["probe_regret"]["difference"] == 1.0
    # a difference the arms had before any learner step (another text, another SFT) is shown as such
    assert versus["cold_start_eval"]["difference"] == 1.0
    assert versus["cold_start_probe_regret"]["difference"] == -0.75
    assert "| episode minus state | +1.00 [" in compare_markdown(result, "cmd")


def test_an_arm_without_its_own_cold_start_evaluation_borrows_the_first_arms_only_when_told(tmp_path):
    """The 2048 episode arm skipped its cold start's evaluation (eval.at_start=false): its cold start is the
    base model played greedily on the same seeds, which the state arm evaluated. Only with
    `shared_cold_start` is it paired against that evaluation, and the row says whose it is."""
    from benchmarks.learning_evidence import compare_arms, compare_markdown

    def arm(name: str, scores: list[float], with_cold: bool) -> dict:
        root = tmp_path / name
        root.mkdir()
        _probe(root, 0, [30.0, 28.0, 26.0, 24.0])
        _probe(root, 8, [20.0, 18.0, 17.0, 15.0])
        cold = {"iteration": 0, "per_seed": {"1": 10.0, "2": 20.0, "3": 30.0}}
        final = {"iteration": 8, "mean": sum(scores) / 3, "ci_low": 0.0, "ci_high": 50.0, "n": 3,
                 "per_seed": dict(zip(("1", "2", "3"), scores, strict=True))}
        return {"game": "2048", "run_dir": str(root), "curve": [cold, final] if with_cold else [final],
                "final": final, "probe": probe_evidence(root, "2048"), "protocol_check": {"passed": True}}

    arms = {"state": arm("s", [12.0, 23.0, 31.0], True), "episode": arm("e", [14.0, 22.0, 36.0], False)}
    alone = compare_arms(arms)
    assert alone["arms"]["episode"]["eval_minus_cold_start"] is None
    shared = compare_arms(arms, shared_cold_start=True)
    row = shared["arms"]["episode"]
    assert row["eval_minus_cold_start"]["difference"] == 4.0 and row["cold_start_from"] == "state"
    assert shared["arms"]["state"]["cold_start_from"] is None
    # not measured twice, so no cold-start difference between the arms is claimed
    assert shared["versus_first"]["episode minus state"]["cold_start_eval"] is None
    text = compare_markdown(shared, "cmd")
    assert "+4.00 [" in text and "(cold start of state)" in text
