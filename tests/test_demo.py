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
    (game,) = cfg.games
    assert bots_beside_run(tmp_path, cfg) == []  # no evaluation: nothing to compare
    run_score = summarize([20.0, 24.0, 37.0]).as_dict()
    write_eval(tmp_path / "eval", "it00004", {game: {"episodes": 3, "score": run_score}}, {"iteration": 4})
    lines = bots_beside_run(tmp_path, cfg)
    moves = cfg.eval.max_steps or cfg.rollout.max_steps
    assert lines[0] == f"evaluation on {game}: 3 episodes on seeds.eval, {moves} moves, mean score [95% CI]"
    assert "the run's adapters (iteration 4)" in lines[1]
    assert f"{run_score['mean']:9.1f}  [{run_score['ci_low']:.1f}, {run_score['ci_high']:.1f}]" in lines[1]
    assert lines[2].lstrip().startswith("random bot") and lines[3].lstrip().startswith("expert bot")
    for bot in ("random", "expert"):
        saved = json.loads((tmp_path / "eval" / f"bots-{bot}.json").read_text())
        assert saved["meta"]["player"] == bot and saved["results"][game]["episodes"] == 3
    expert = json.loads((tmp_path / "eval" / "bots-expert.json").read_text())["results"][game]["score"]
    assert f"{expert['mean']:9.1f}" in lines[3]


def test_the_closing_table_shows_the_cold_start_and_the_final_policy_and_their_paired_change(tmp_path):
    cfg = load_config(DEMO_CONFIG)  # its own 8 seeds: the protocol check passes, so the change is claimed
    (game,) = cfg.games
    seeds = [str(cfg.seeds.eval.start + i) for i in range(cfg.eval.episodes)]
    cold = [20.0, 24.0, 37.0, 41.0, 18.0, 30.0, 25.0, 33.0]
    for it, scores in ((0, cold), (2, [x + 11.0 + (i % 2) for i, x in enumerate(cold)])):
        per_seed = dict(zip(seeds, scores, strict=True))
        entry = {"episodes": len(scores), "score": summarize(scores).as_dict(), "per_seed": per_seed}
        write_eval(tmp_path / "eval", f"it{it:05d}", {game: entry}, {"iteration": it})
    lines = bots_beside_run(tmp_path, cfg)
    assert "the run's adapters (iteration 0)" in lines[1] and f"{sum(cold) / 8:9.1f}" in lines[1]
    assert "the run's adapters (iteration 2)" in lines[2] and f"{sum(cold) / 8 + 11.5:9.1f}" in lines[2]
    assert lines[3].lstrip().startswith("random bot") and lines[4].lstrip().startswith("expert bot")
    assert "protocol check passed" in "\n".join(lines)
    # differences of 11 and 12 on alternate seeds: mean 11.5, s = 0.535, 95% t half-width 0.45
    assert lines[-1].startswith(f"  {game}: iteration 2 minus iteration 0 (paired, 95% t): a gain was "
                                f"measured: score +11.50 [11.05, 11.95] over 8 pairs")


def _probe_file(folder, iteration: int, regrets: list[float], separate: bool = True) -> None:
    def score(values: list[float]) -> dict:
        return {"n": len(values), "mean_regret": sum(values) / len(values),
                "regret": summarize(values).as_dict(),
                "best_share": 0.5, "invalid_share": 0.0, "regrets": values}

    folder.mkdir(parents=True, exist_ok=True)
    body = {"meta": {"iteration": iteration},
            "results": {"2048": {"model": score(regrets), "random": score([9.0, 11.0, 10.0, 12.0]),
                                 "expert": score([1.0, 2.0, 1.5, 1.0]), "bots_separate": separate}}}
    (folder / f"probe-it{iteration:05d}.json").write_text(json.dumps(body))


def test_the_closing_lines_give_the_probe_with_the_bots_and_the_paired_change(tmp_path):
    from coplay.driver.demo import probe_lines

    _probe_file(tmp_path / "eval", 0, [8.0, 6.0, 7.0, 9.0])
    _probe_file(tmp_path / "eval", 2, [4.0, 3.0, 5.0, 4.0])
    text = "\n".join(probe_lines(tmp_path))
    assert "(iteration 0)" in text and "(iteration 2)" in text
    assert "random bot" in text and "expert bot" in text
    # 4 positions, each 3.5 lower on average: the paired difference with its interval
    assert "iteration 2 minus iteration 0: -3.50" in text and "paired over 4 positions" in text


def test_a_probe_on_which_the_bots_do_not_separate_is_not_reported_as_a_result(tmp_path):
    from coplay.driver.demo import probe_lines

    _probe_file(tmp_path / "eval", 0, [8.0, 6.0, 7.0, 9.0], separate=False)
    _probe_file(tmp_path / "eval", 2, [4.0, 3.0, 5.0, 4.0], separate=False)
    text = "\n".join(probe_lines(tmp_path))
    assert "not a result" in text and "minus iteration" not in text
    assert probe_lines(tmp_path / "nothing") == []


def test_the_probe_change_says_plainly_whether_a_gain_was_measured(tmp_path):
    from coplay.driver.demo import probe_lines

    _probe_file(tmp_path / "fell" / "eval", 0, [8.0, 6.0, 7.0, 9.0])
    _probe_file(tmp_path / "fell" / "eval", 2, [4.0, 3.0, 5.0, 4.0])
    assert "a gain was measured: regret -3.50" in "\n".join(probe_lines(tmp_path / "fell"))
    _probe_file(tmp_path / "flat" / "eval", 0, [8.0, 6.0, 7.0, 9.0])
    _probe_file(tmp_path / "flat" / "eval", 2, [9.0, 5.0, 8.0, 8.0])
    assert "no gain was measured" in "\n".join(probe_lines(tmp_path / "flat"))


def _eval_file(folder, iteration: int, per_seed: dict[str, float]) -> None:
    score = summarize(list(per_seed.values())).as_dict()
    write_eval(folder, f"it{iteration:05d}", {"2048": {"episodes": len(per_seed), "score": score,
                                                       "per_seed": per_seed}}, {"iteration": iteration})


def test_the_evaluation_change_from_the_cold_start_is_claimed_only_on_a_passing_protocol(tmp_path):
    from coplay.driver.demo import _change_lines

    _eval_file(tmp_path, 0, {"0": 20.0, "1": 24.0, "2": 30.0})
    _eval_file(tmp_path, 2, {"0": 30.0, "1": 35.0, "2": 40.0})
    runs = sorted(tmp_path.glob("it*.json"))
    (passed,) = _change_lines("2048", runs, {"passed": True, "reason": ""})
    assert "iteration 2 minus iteration 0" in passed and "a gain was measured: score +10.33" in passed
    (failed,) = _change_lines("2048", runs, {"passed": False, "reason": ""})
    assert "no claim, the protocol check did not pass" in failed and "measured" not in failed
    assert _change_lines("2048", runs[:1], {"passed": True, "reason": ""}) == []  # nothing to compare


def test_make_demo_evaluates_the_cold_start_and_the_end_on_a_protocol_whose_bots_separate():
    """The demo's own evaluation protocol passes the ruler's check (its bots played here on the same seeds
    and horizon), and it evaluates and probes right after the cold start and after its last iteration."""
    from coplay.eval.ruler import bot_results, protocol_check

    cfg = load_config(DEMO_CONFIG)
    assert cfg.model.name == "smollm2-135m-instruct"
    assert cfg.eval.at_start and cfg.eval.every == cfg.probe.every == cfg.loop.iterations
    assert cfg.eval.temperature == 0.0  # greedy: the cold start and the end differ by policy, not by draw
    bots, _ = bot_results(cfg)
    checks = protocol_check(bots)
    assert set(checks) == set(cfg.games)
    assert all(check["passed"] for check in checks.values()), checks
