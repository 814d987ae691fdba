"""The ruler (coplay.eval.ruler): the bots played on an evaluation's own protocol, the protocol check, and
paired comparisons by start seed — what a user reads in `coplay eval`, `coplay eval --compare`, the demo's
closing lines and the co-evolution benchmark's table.

Known values used: A = [1, 2, 3], B = [2, 4, 6] differ by [1, 2, 3] seed by seed: mean 2, s = 1, and the
95% t-interval is 2 ± t(0.975, 2) / sqrt(3) = 2 ± 4.302653 / 1.732051 = [-0.4841, 4.4841] (scipy's ttest_rel
gives the same). 2048 at 8 moves on 8 seeds: the expert does not beat the random bot (benchmarks/ruler.py
measured 17.1 against 22.6 on 32 seeds); Candy Crush at 6 moves does (182.2 against 72.7).
"""

from __future__ import annotations

import json

import pytest

import coplay_envs
from coplay.cli import main
from coplay.config import load_config
from coplay.eval.compare import compare_files
from coplay.eval.protocol import summarize_eval, write_eval
from coplay.eval.ruler import FAILED_LABEL, failed_games, ruler_meta
from coplay.eval.stats import paired_difference
from coplay.types import Trajectory


def _trajs(game: str, scores: dict[int, float]) -> list[Trajectory]:
    return [Trajectory(episode_id=f"{game}-s{seed}", game=game, seat="player_0", role="player", seed=seed,
                       score=score) for seed, score in scores.items()]


def _cfg(game: str, steps: int, seeds: int, *extra: str):
    return load_config(None, [f"games=[{game}]", f"eval.max_steps={steps}", f"eval.episodes={seeds}",
                              "logging.console=false", *extra])


def test_paired_difference_on_a_hand_example_matches_scipy():
    from scipy import stats

    a = {"1": 1.0, "2": 2.0, "3": 3.0}
    b = {"1": 2.0, "2": 4.0, "3": 6.0, "99": 1000.0}  # a seed only B played is not paired
    d = paired_difference(a, b)
    assert d is not None and d.n == 3 and d.difference == pytest.approx(2.0)
    assert (d.mean_a, d.mean_b) == pytest.approx((2.0, 4.0))
    expected = stats.ttest_rel([2, 4, 6], [1, 2, 3]).confidence_interval(0.95)
    assert (d.ci_low, d.ci_high) == pytest.approx((expected.low, expected.high), abs=1e-9)
    assert (d.ci_low, d.ci_high) == pytest.approx((-0.4841, 4.4841), abs=1e-4)
    assert 1.0 <= d.boot_low <= d.boot_high <= 3.0 and not d.excludes_zero
    assert paired_difference({"1": 1.0}, {"1": 2.0, "2": 3.0}) is None  # one shared seed: no interval


def test_per_seed_scores_round_trip_and_compare_pairs_them(tmp_path):
    a = summarize_eval(_trajs("2048", {1000000: 10.0, 1000001: 20.0, 1000002: 30.0, 1000003: 40.0}))
    b = summarize_eval(_trajs("2048", {1000000: 12.0, 1000001: 23.0, 1000002: 31.0, 1000003: 46.0}))
    assert a["2048"]["per_seed"] == {"1000000": 10.0, "1000001": 20.0, "1000002": 30.0, "1000003": 40.0}
    pa = write_eval(tmp_path, "a", a, {"player": "x"})[0]
    pb = write_eval(tmp_path, "b", b, {"player": "y"})[0]
    assert json.loads(pa.read_text())["results"]["2048"]["per_seed"] == a["2048"]["per_seed"]
    out = tmp_path / "cmp.json"
    text, rows = compare_files(pa, pb, out)
    paired = next(r for r in rows if r.paired)
    assert paired.n_a == 4 and paired.difference == pytest.approx(3.0)  # diffs 2, 3, 1, 6
    welch = next(r for r in rows if r.group == "score")
    assert welch.difference == pytest.approx(3.0)
    # pairing removes the spread the seeds share: a far narrower interval than Welch's
    width = paired.difference_ci[1] - paired.difference_ci[0]
    assert width < (welch.difference_ci[1] - welch.difference_ci[0]) / 3
    assert "paired by start seed" in text
    assert [r["group"] for r in json.loads(out.read_text())["rows"]] == ["score", "score, paired by seed"]


def test_cli_compare_of_two_files_sharing_seeds_shows_a_paired_row(tmp_path, capsys):
    a = write_eval(tmp_path, "a", summarize_eval(_trajs("tetris", {5: 6.0, 6: 8.0, 7: 6.0})), {})[0]
    b_scores = {5: 10.0, 6: 12.0, 7: 8.0, 8: 30.0}
    b = write_eval(tmp_path, "b", summarize_eval(_trajs("tetris", b_scores)), {})[0]
    assert main(["eval", "--compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "score, paired by seed" in line)
    assert "+3.33" in row and " 3 " in row  # B − A over the 3 shared seeds: (4 + 4 + 2) / 3
    assert "protocol not checked for tetris" in text


def test_a_protocol_where_the_bots_do_not_separate_is_labelled_and_not_a_result(tmp_path, capsys):
    cfg = _cfg("2048", 8, 8)
    player = summarize_eval(_trajs("2048", {1000000 + i: 30.0 + i for i in range(8)}))
    meta = {"player": "model", **ruler_meta(cfg, player, tmp_path)}
    check = meta["protocol_check"]
    assert check["passed"] is False and failed_games(meta) == ["2048"]
    game = check["games"]["2048"]
    assert game["expert"]["n"] == 8 and "does not lie entirely above" in game["reason"]
    assert {"random", "expert", "heuristic"} <= set(game)  # 2048 also has the fixed-order heuristic
    # the bots' files name their protocol, so comparing one with the evaluation warns about nothing
    bots = json.loads((tmp_path / "bots-expert.json").read_text())["meta"]
    assert bots["seeds"] == list(range(1000000, 1000008)) and bots["max_steps"] == 8
    assert bots["episodes_single"] == 8 and bots["seeds_eval_start"] == 1000000
    path, md = write_eval(tmp_path, "model", player, meta)
    assert FAILED_LABEL in md.read_text()
    assert main(["eval", "--compare", str(tmp_path / "bots-random.json"), str(path)]) == 0
    text = capsys.readouterr().out
    assert "warning" not in text
    assert f"2048: {FAILED_LABEL}" in text
    assert "not a result" in next(line for line in text.splitlines() if "paired by seed" in line)


def test_a_protocol_where_the_bots_separate_passes(tmp_path):
    cfg = _cfg("candy_crush", 6, 8, "game.candy_crush.env_kwargs={max_moves: 6}")
    meta = ruler_meta(cfg, None, tmp_path)
    check = meta["protocol_check"]["games"]["candy_crush"]
    assert check["passed"] is True and "lies entirely above" in check["reason"]
    assert check["expert"]["ci95"][0] > check["random"]["ci95"][1]
    # the greedy clearer sits between the bots: the counts a `show_clears` text lists are worth something
    assert check["random"]["mean"] < check["heuristic"]["mean"] < check["expert"]["mean"]
    # a second evaluation on the same protocol reads the bots back instead of writing new files
    assert ruler_meta(cfg, None, tmp_path) == meta
    assert sorted(p.name for p in tmp_path.glob("bots-*.json")) == ["bots-expert.json", "bots-heuristic.json",
                                                                   "bots-random.json"]
    # another horizon is another protocol: its files sit beside the first ones
    ruler_meta(_cfg("candy_crush", 3, 8, "game.candy_crush.env_kwargs={max_moves: 6}"), None, tmp_path)
    assert (tmp_path / "bots-expert-2.json").is_file()


def test_the_fixed_order_heuristic_plays_the_first_legal_of_left_down_right_up():
    from coplay_envs.game2048.bots import FixedOrderBot

    bot = FixedOrderBot()
    assert bot.act("", {"legal_actions": ["up", "right", "down"]}).action == "down"
    assert bot.act("", {"legal_actions": ["up", "left"]}).action == "left"
    with pytest.raises(ValueError, match="sideways"):
        FixedOrderBot(order=("sideways",))


def test_the_candy_heuristic_plays_the_swap_that_clears_the_most_at_once():
    from coplay_envs.candy.bots import GreedyClearBot

    env = coplay_envs.make_env("candy_crush", show_clears=True)
    for seed in range(4):
        _, info = env.reset(seed=seed)
        action = GreedyClearBot().act("", info).action
        assert info["clears"][info["legal_actions"].index(action)] == max(info["clears"])


def test_coplay_eval_writes_the_bots_and_the_check_beside_the_evaluation(tmp_path, capsys):
    assert main(["eval", "--policy", "random", "--games", "2048", "--episodes", "4", "--max-steps", "8",
                 "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    (path,) = tmp_path.glob("random_*.json")
    meta = json.loads(path.read_text())["meta"]
    assert meta["protocol_check"]["games"]["2048"]["random"]["n"] == 4
    assert meta["vs_bots"]["2048"]["random"]["difference"] == pytest.approx(0.0)  # the same bot, same seeds
    assert "Protocol check" in printed and "player − bot" in printed
    assert sorted(p.name for p in tmp_path.glob("bots-*.json")) == ["bots-expert.json", "bots-heuristic.json",
                                                                    "bots-random.json"]


def test_the_demo_closing_lines_say_when_the_protocol_fails(tmp_path):
    from coplay.driver.demo import bots_beside_run

    (tmp_path / "eval").mkdir()
    player = summarize_eval(_trajs("2048", {1000000 + i: 30.0 + i for i in range(8)}))
    write_eval(tmp_path / "eval", "it00002", player, {"iteration": 2})
    lines = bots_beside_run(tmp_path, _cfg("2048", 8, 8))
    text = "\n".join(lines)
    assert "expert bot" in text and "heuristic bot" in text and "paired over 8 seeds" in text
    assert FAILED_LABEL in lines[-1] and "minus the expert bot" not in text


def test_the_demo_closing_line_states_the_difference_when_the_protocol_passes(tmp_path):
    from coplay.driver.demo import bots_beside_run

    (tmp_path / "eval").mkdir()
    player = summarize_eval(_trajs("candy_crush", {1000000 + i: 100.0 for i in range(8)}))
    write_eval(tmp_path / "eval", "it00002", player, {"iteration": 2})
    lines = bots_beside_run(tmp_path, _cfg("candy_crush", 6, 8, "game.candy_crush.env_kwargs={max_moves: 6}"))
    assert "protocol check passed" in lines[-1] and "minus the expert bot" in lines[-1]
    assert FAILED_LABEL not in "\n".join(lines)
